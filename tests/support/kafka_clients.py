"""librdkafka as a test's client: one record produced and read back under given settings."""

from __future__ import annotations

import time
import uuid
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

__all__ = ["librdkafka_round_trip"]

#: Bound of each step (the topic's creation, the delivery, the read back).
DEADLINE_S = 60.0


def librdkafka_round_trip(settings: dict[str, Any], topic: str) -> bytes:
    """Create ``topic``, produce a record, read it back (asserted); its value."""
    admin = AdminClient(dict(settings))
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(DEADLINE_S)
    producer = Producer({**settings, "linger.ms": 0})
    value = uuid.uuid4().bytes
    errors: list[Any] = []
    producer.produce(topic, value=value,
                     on_delivery=lambda error, _m: errors.append(error) if error else None)
    assert producer.flush(DEADLINE_S) == 0 and errors == []
    consumer = Consumer({**settings, "group.id": f"g-{topic}", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    deadline = time.monotonic() + DEADLINE_S
    try:
        while True:
            assert time.monotonic() < deadline, "no record read back"
            message = consumer.poll(0.5)
            if message is not None:
                assert message.error() is None, message.error()
                assert message.value() == value
                return value
    finally:
        consumer.close()
