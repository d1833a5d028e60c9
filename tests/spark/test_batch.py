"""Batch reads through Spark equal what the SDK reads, across a scale event."""

from __future__ import annotations

from typing import Any

import pytest

import folio
from tests.spark._topics import rows as sdk_rows


def _plain(row: dict[str, Any]) -> dict[str, Any]:
    """A row with its time as epoch ms and its headers as a dict (Spark and Arrow differ)."""
    headers = row["headers"]
    return {**row, "timestamp": round(row["timestamp"].timestamp() * 1000),
            "headers": dict(headers.items() if isinstance(headers, dict) else headers)}


def _load(spark: Any, client: folio.Client, topic: str, **options: str) -> Any:
    reader = spark.read.format("folio").option("endpoint", client.endpoint).option("topic", topic)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def test_batch_read_equals_the_sdk_read_after_a_scale_event(spark: Any,
                                                            client: folio.Client) -> None:
    topic = "spark-batch"
    client.create_topic(topic, segments=2)
    with client.writer(topic) as writer:
        for n in range(300):
            writer.write_event(f"before-{n}".encode(), routing_key=f"key-{n % 23}",
                               headers={"n": str(n).encode()} if n % 50 == 0 else None)
    first = client.get_segments(topic)[0]
    middle = (first.key_low + first.key_high) / 2
    client.scale_topic(topic, [first.name], [(first.key_low, middle), (middle, first.key_high)])
    with client.writer(topic) as writer:
        for n in range(300):
            writer.write_event(f"after-{n}".encode(), routing_key=f"key-{n % 23}")
    # A committed and an aborted transaction: the aborted events end some segments.
    with client.transactional_writer(topic) as txns:
        committed = txns.begin()
        for n in range(20):
            committed.write_event(f"txn-{n}".encode(), routing_key=f"key-{n}")
        committed.commit()
        aborted = txns.begin()
        for n in range(20):
            aborted.write_event(f"aborted-{n}".encode(), routing_key=f"key-{n}")
        aborted.flush()
        aborted.abort()
    segments = client.get_segments(topic, include_sealed=True)
    assert len(segments) == 4 and sum(s.sealed for s in segments) == 1

    df = _load(spark, client, topic, maxEventsPerPartition="100")
    assert df.rdd.getNumPartitions() > len(segments)  # long segments were split
    read = sorted((_plain(row.asDict()) for row in df.collect()),
                  key=lambda r: (r["segment"], r["offset"]))
    expected = [_plain(row) for row in sdk_rows(client, topic)]
    assert len(expected) == 620
    assert read == expected
    assert {r["payload"] for r in read} == (
        {f"before-{n}".encode() for n in range(300)} | {f"after-{n}".encode() for n in range(300)}
        | {f"txn-{n}".encode() for n in range(20)})
    assert read[0]["topic"] == topic and read[0]["timestamp"] is not None
    assert sum(1 for r in read if r["headers"]) == 6

    everything = _load(spark, client, topic, isolation="read_uncommitted").count()
    assert everything == 640

    # Between two cuts: only the slice asked for.
    sealed = next(s for s in segments if s.sealed)
    cut = _load(spark, client, topic,
                startingPositions=f'{{"{sealed.name}": 10}}',
                endingPositions=f'{{"{sealed.name}": 25}}').where(f"segment = '{sealed.name}'")
    assert sorted(r.offset for r in cut.collect()) == list(range(10, 25))


def test_bad_options_fail_with_their_name(spark: Any, client: folio.Client) -> None:
    with pytest.raises(Exception, match="option 'topic' is required"):
        spark.read.format("folio").option("endpoint", client.endpoint).load().collect()
    with pytest.raises(Exception, match=r"TopicNotFoundError|no such topic|not found"):
        _load(spark, client, "no-such-topic").collect()
