"""Check Kafka producers' promises against an independent read-back of the partitions.

``segment_ends`` asks the broker's gRPC Admin API (not Kafka) for the end
offset of each partition's segment; ``read_partitions`` reads every record of
each partition from offset 0 up to that end with kafka-python (a client
other than the librdkafka producers under test), so nothing after the last
acknowledged record goes unseen: a trailing duplicate, the likeliest one (the
last batch resent after a cut), is read like any other record.
``check_delivered_once`` then holds the records to what the producer's
delivery reports said: each delivered record stored exactly once, at the
partition and offset its report gave, and nothing stored that was not
delivered.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

from kafka import KafkaConsumer, TopicPartition

import folio
from tests.support.wait import wait_for

__all__ = ["Stored", "check_delivered_once", "read_partitions", "segment_ends"]

#: partition -> [(offset, value)] in offset order, as read back.
Stored = dict[int, list[tuple[int, bytes]]]


def segment_ends(address: str | Iterable[str], topic: str,
                 partitions: Iterable[int]) -> dict[int, int]:
    """partition -> end offset of its segment (``topic/partition``), from gRPC Admin."""
    endpoints = address if isinstance(address, str) else ",".join(address)
    with folio.Client(endpoints, timeout_s=30) as client:
        return {p: client.get_segment_info(f"{topic}/{p}").segment.end_offset
                for p in partitions}


def read_partitions(bootstrap: str, topic: str, ends: Mapping[int, int],
                    timeout_s: float = 60.0) -> Stored:
    """Every record of each partition from offset 0 up to ``ends[partition]``."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap.split(","), group_id=None,
                             enable_auto_commit=False, auto_offset_reset="earliest")
    stored: Stored = {p: [] for p in ends}
    try:
        assigned = [TopicPartition(topic, p) for p in ends]
        consumer.assign(assigned)
        for tp in assigned:
            consumer.seek(tp, 0)

        def read_up_to_the_ends() -> bool:
            for tp, records in consumer.poll(500).items():
                stored[tp.partition].extend((r.offset, r.value) for r in records)
            return all(consumer.position(TopicPartition(topic, p)) >= end
                       for p, end in ends.items())

        wait_for(read_up_to_the_ends, f"{topic} read up to its segments' ends {dict(ends)}",
                 timeout_s=timeout_s)
    finally:
        consumer.close()
    return {p: [(o, v) for o, v in records if o < ends[p]] for p, records in stored.items()}


def check_delivered_once(delivered: Mapping[bytes, tuple[int, int]], stored: Stored,
                         ends: Mapping[int, int]) -> None:
    """Each delivered value stored once, at its reported (partition, offset); nothing else."""
    for partition, records in stored.items():
        assert [o for o, _ in records] == list(range(ends[partition])), (
            f"partition {partition}: offsets read are not 0..{ends[partition] - 1}")
    values = Counter(v for records in stored.values() for _, v in records)
    doubled = sorted(v for v, n in values.items() if n > 1)
    assert doubled == [], f"{len(doubled)} records stored twice, e.g. {doubled[:5]}"
    lost = sorted(set(delivered) - set(values))
    assert lost == [], f"{len(lost)} delivered records not stored, e.g. {lost[:5]}"
    extra = sorted(set(values) - set(delivered))
    assert extra == [], f"{len(extra)} records stored but never delivered, e.g. {extra[:5]}"
    misplaced = [(v, delivered[v], (p, o)) for p, records in stored.items()
                 for o, v in records if delivered[v] != (p, o)]
    assert misplaced == [], (f"{len(misplaced)} delivery reports name another place "
                             f"(value, reported, stored): {misplaced[:5]}")
