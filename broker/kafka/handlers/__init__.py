"""Kafka API handlers, one module per API family; each module lists its rows in ``ROWS``."""
