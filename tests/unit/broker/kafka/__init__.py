"""Unit tests of the Kafka front-end (broker.kafka)."""
