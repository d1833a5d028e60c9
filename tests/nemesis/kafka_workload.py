"""Kafka clients beside the SDK workload: idempotent librdkafka producers and a consumer group.

Two idempotent producers (``acks=all``, ``enable.idempotence``) write numbered
records to every partition of a topic and keep each delivery report's
partition and offset; delivery errors are what reached the application.
Two consumers of one group read the topic. The checks: every delivered record
stored exactly once, at the partition and offset its report gave, nothing
stored that was not produced, and the group reading every stored record.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

__all__ = ["KafkaWorkload", "check_kafka"]

TOPIC = "chaos-kafka"
PARTITIONS = 6


@dataclass
class KafkaWorkload:
    """``producers`` producer threads and ``consumers`` group members until ``stop``."""

    bootstrap: str
    producers: int = 2
    consumers: int = 2
    delivered: dict[str, tuple[int, int]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    consumed: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._stop_consuming = threading.Event()
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._produce, args=(i,), daemon=True)
                         for i in range(self.producers)]
        self._consumers = [threading.Thread(target=self._consume, args=(i,), daemon=True)
                           for i in range(self.consumers)]
        for thread in [*self._threads, *self._consumers]:
            thread.start()

    def _produce(self, index: int) -> None:
        generation = 0
        while not self._stop.is_set():
            self._produce_until_fatal(index, generation)
            generation += 1

    def _produce_until_fatal(self, index: int, generation: int) -> None:
        """One producer until stopped or until librdkafka calls its state fatal.

        A fatal producer (e.g. OUT_OF_ORDER_SEQUENCE_NUMBER on a correct
        batch) is what the application sees: recorded, and a new producer
        (a new producer id) goes on.
        """
        producer = Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True,
                             "acks": "all", "linger.ms": 5, "message.timeout.ms": 120_000,
                             "log_level": 2})
        fatal = threading.Event()

        def report(error: KafkaError | None, message: Any) -> None:
            with self._lock:
                if error is not None:
                    self.errors.append(f"producer {index}.{generation}: {error}")
                    if error.fatal():
                        fatal.set()
                else:
                    self.delivered[message.value().decode()] = (message.partition(),
                                                                message.offset())

        number = 0
        while not self._stop.is_set() and not fatal.is_set():
            for partition in range(PARTITIONS):
                producer.produce(TOPIC, value=f"p{index}.{generation}:{partition}:{number}"
                                 .encode(), partition=partition, on_delivery=report)
            number += 1
            producer.poll(0)
            if number % 20 == 0:
                # A round's reports before the next (bounded: a fatal error ends it).
                deadline = time.monotonic() + 130
                while len(producer) and not fatal.is_set() and time.monotonic() < deadline:
                    producer.poll(0.1)
            time.sleep(0.005)
        if fatal.is_set():
            producer.purge()
        remaining = producer.flush(130)
        if remaining:
            with self._lock:
                self.errors.append(f"producer {index}.{generation}: {remaining} records "
                                   "never reported")

    def _consume(self, index: int) -> None:
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "chaos-kafka",
                             "auto.offset.reset": "earliest", "enable.auto.commit": True,
                             "session.timeout.ms": 10_000, "log_level": 2})
        consumer.subscribe([TOPIC])
        try:
            while not self._stop_consuming.is_set():
                message = consumer.poll(0.2)
                if message is None:
                    continue
                if message.error() is not None:
                    with self._lock:
                        self.errors.append(f"consumer {index}: {message.error()}")
                    continue
                value = message.value()
                assert value is not None, f"consumer {index}: a record without a value"
                with self._lock:
                    self.consumed.append(value.decode())
        finally:
            consumer.close()

    def stop_producing(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(200)

    def stop_consuming(self) -> None:
        self._stop_consuming.set()
        for thread in self._consumers:
            thread.join(60)


def _read_partitions(bootstrap: str, timeout_s: float = 120) -> list[Any]:
    """Every record of every partition, up to each partition's high watermark."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "chaos-kafka-check",
                         "enable.auto.commit": False, "log_level": 2})
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout_s)[1]
                for p in range(PARTITIONS)}
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
        messages: list[Any] = []
        deadline = time.monotonic() + timeout_s
        positions = dict.fromkeys(range(PARTITIONS), 0)
        while any(positions[p] < ends[p] for p in range(PARTITIONS)):
            assert time.monotonic() < deadline, ("partitions not read to their ends", ends)
            message = consumer.poll(0.2)
            if message is None or message.error() is not None:
                continue
            messages.append(message)
            partition, offset = message.partition(), message.offset()
            assert partition is not None and offset is not None  # set on a consumed record
            positions[partition] = offset + 1
        return messages
    finally:
        consumer.close()


def check_kafka(workload: KafkaWorkload, bootstrap: str) -> dict[str, list[str]]:
    """The Kafka promises; an empty dict when all held."""
    messages = _read_partitions(bootstrap)
    stored = Counter(m.value().decode() for m in messages)
    where = {m.value().decode(): (m.partition(), m.offset()) for m in messages}
    failures: dict[str, list[str]] = {}
    lost = [v for v in workload.delivered if v not in stored]
    doubled = [v for v, n in stored.items() if n > 1]
    wrong = [f"{v}: reported {at}, stored {where[v]}" for v, at in workload.delivered.items()
             if v in where and where[v] != at]
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and not set(stored) <= set(workload.consumed):
        time.sleep(0.5)
    unread = sorted(set(stored) - set(workload.consumed))
    for name, items in (("kafka lost", lost), ("kafka doubled", doubled),
                        ("kafka wrong offset", wrong), ("kafka group missed", unread)):
        if items:
            failures[name] = items[:10] + ([f"... {len(items)} in all"] if len(items) > 10 else [])
    return failures
