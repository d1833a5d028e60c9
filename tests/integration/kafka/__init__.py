"""Kafka clients against a real standalone with its Kafka listener (docs/kafka.md)."""
