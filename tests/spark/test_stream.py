"""Streaming reads: availableNow resumes from its checkpoint, read limits, segment order."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import folio


class _Batches:
    """``foreachBatch`` target: each micro-batch's rows, collected on the driver."""

    def __init__(self) -> None:
        self.batches: list[list[dict[str, Any]]] = []

    def __call__(self, df: Any, batch_id: int) -> None:
        rows = [row.asDict() for row in df.collect()]
        if rows:
            self.batches.append(rows)


def _run(spark: Any, client: folio.Client, topic: str, checkpoint: Path,
         **options: str) -> _Batches:
    reader = spark.readStream.format("folio").option("endpoint", client.endpoint) \
        .option("topic", topic)
    for key, value in options.items():
        reader = reader.option(key, value)
    collected = _Batches()
    query = (reader.load().writeStream.foreachBatch(collected)
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    query.awaitTermination()
    return collected


def _write(client: folio.Client, topic: str, payloads: range, keys: int = 5) -> None:
    with client.writer(topic) as writer:
        for n in payloads:
            writer.write_event(f"e{n}".encode(), routing_key=f"k{n % keys}")


def test_available_now_twice_on_one_checkpoint_reads_only_new_data(
        spark: Any, client: folio.Client, tmp_path: Path) -> None:
    client.create_topic("stream-twice", segments=2)
    _write(client, "stream-twice", range(100))
    first = _run(spark, client, "stream-twice", tmp_path / "checkpoint",
                 maxEventsPerTrigger="30")
    assert sorted(r["payload"] for b in first.batches for r in b) == \
        sorted(f"e{n}".encode() for n in range(100))
    assert len(first.batches) >= 4 and all(len(b) <= 30 for b in first.batches)

    _write(client, "stream-twice", range(100, 150))
    second = _run(spark, client, "stream-twice", tmp_path / "checkpoint")
    assert sorted(r["payload"] for b in second.batches for r in b) == \
        sorted(f"e{n}".encode() for n in range(100, 150))


def test_a_successor_is_read_after_its_predecessor_so_key_order_holds(
        spark: Any, client: folio.Client, tmp_path: Path) -> None:
    client.create_topic("stream-scaled", segments=1)
    _write(client, "stream-scaled", range(60))
    only = client.get_segments("stream-scaled")[0]
    client.scale_topic("stream-scaled", [only.name], [(0.0, 0.5), (0.5, 1.0)])
    _write(client, "stream-scaled", range(60, 120))
    collected = _run(spark, client, "stream-scaled", tmp_path / "checkpoint")
    seen: dict[str, list[int]] = {}
    for batch in collected.batches:  # micro-batches in order; within one, by offset
        for row in sorted(batch, key=lambda r: (r["segment"], r["offset"])):
            seen.setdefault(row["routing_key"], []).append(int(row["payload"][1:]))
    assert sum(map(len, seen.values())) == 120
    for key, numbers in seen.items():
        assert numbers == sorted(numbers), key  # per-key append order across the split
    first_batch_segments = {r["segment"] for r in collected.batches[0]}
    assert first_batch_segments == {only.name}
