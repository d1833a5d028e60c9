"""The ``value`` column and payloads that do not decode: fail (naming segment and offset),
skip or raw, in batch and streaming reads; a failed micro-batch is read again from its start.

The scenario of issue 22: one segment holding 100 JSON events, ``b"not json"``
and 100 more, written in one flush.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import folio
from folio.spark._values import ValueDecoder

BAD = b"not json"
BAD_OFFSET = 100
GOOD = [*range(BAD_OFFSET), *range(BAD_OFFSET + 1, 2 * BAD_OFFSET + 1)]


def _write_scenario(client: folio.Client, topic: str) -> str:
    client.create_topic(topic, 1)
    with client.writer(topic) as writer:
        for i in range(BAD_OFFSET):
            writer.write_event(json.dumps({"n": i}).encode())
        writer.write_event(BAD)
        for i in range(BAD_OFFSET, 2 * BAD_OFFSET):
            writer.write_event(json.dumps({"n": i}).encode())
        writer.flush()
    (segment,) = client.get_segments(topic)
    assert segment.end_offset == 2 * BAD_OFFSET + 1
    return segment.name


def _load(spark: Any, client: folio.Client, topic: str, **options: str) -> Any:
    reader = spark.read.format("folio").option("endpoint", client.endpoint).option("topic", topic)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def _rows(df: Any) -> list[dict[str, Any]]:
    return sorted((row.asDict() for row in df.collect()), key=lambda r: r["offset"])


def test_the_decoder_alone() -> None:
    decoder = ValueDecoder("t", "t/0", "json", "raw")
    values, errors, keep = decoder.decode([b"1", b"{", "é".encode("latin-1")], 7)
    assert values == ["1", None, None] and keep is None
    assert errors[0] is None
    assert errors[1] is not None and errors[1].startswith("segment t/0 offset 8: ")
    assert errors[2] is not None and "offset 9" in errors[2] and "UnicodeDecodeError" in errors[2]
    assert ValueDecoder("t", "t/0", "string", "skip").decode([b"a", b"\xff"], 0)[2] == [0]
    with pytest.raises(folio.DeserializationError) as raised:
        ValueDecoder("t", "t/0", "json", "fail").decode([b"1", b"x"], 0)
    assert (raised.value.segment, raised.value.offset, raised.value.payload) == ("t/0", 1, b"x")


def test_batch_read_fails_naming_segment_and_offset_by_default(
        spark: Any, client: folio.Client) -> None:
    segment = _write_scenario(client, "spark-ud-fail")
    df = _load(spark, client, "spark-ud-fail", valueFormat="json")
    assert df.columns[-2:] == ["value", "value_error"]
    with pytest.raises(Exception, match=rf"DeserializationError: segment {segment} offset 100"):
        df.collect()
    # binary (the default) decodes nothing: every row, no value column.
    plain = _load(spark, client, "spark-ud-fail")
    assert "value" not in plain.columns and plain.count() == 2 * BAD_OFFSET + 1


def test_batch_read_skip_and_raw(spark: Any, client: folio.Client) -> None:
    segment = _write_scenario(client, "spark-ud-policies")
    skipped = _rows(_load(spark, client, "spark-ud-policies", valueFormat="json",
                          onDeserializationError="skip", maxEventsPerPartition="64"))
    assert [r["offset"] for r in skipped] == GOOD
    assert [json.loads(r["value"]) for r in skipped] == [{"n": i} for i in range(200)]
    assert all(r["value_error"] is None for r in skipped)
    raw = _rows(_load(spark, client, "spark-ud-policies", valueFormat="json",
                      onDeserializationError="raw"))
    assert [r["offset"] for r in raw] == list(range(2 * BAD_OFFSET + 1))
    bad = raw[BAD_OFFSET]
    assert bad["payload"] == BAD and bad["value"] is None
    assert bad["value_error"].startswith(f"segment {segment} offset 100: ")
    assert sum(1 for r in raw if r["value_error"] is not None) == 1
    with pytest.raises(Exception, match="option 'onDeserializationError' must be"):
        _load(spark, client, "spark-ud-policies", valueFormat="json",
              onDeserializationError="ignore").collect()
    with pytest.raises(Exception, match="option 'valueFormat' must be"):
        _load(spark, client, "spark-ud-policies", valueFormat="avro").collect()


class _Batches:
    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def __call__(self, df: Any, batch_id: int) -> None:
        self.rows += [row.asDict() for row in df.collect()]


def _stream(spark: Any, client: folio.Client, topic: str, checkpoint: Path,
            **options: str) -> tuple[_Batches, Any]:
    reader = spark.readStream.format("folio").option("endpoint", client.endpoint) \
        .option("topic", topic).option("valueFormat", "json").option("maxEventsPerTrigger", "50")
    for key, value in options.items():
        reader = reader.option(key, value)
    collected = _Batches()
    query = (reader.load().writeStream.foreachBatch(collected)
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    return collected, query


def test_stream_fails_at_the_event_and_resumes_there_from_its_checkpoint(
        spark: Any, client: folio.Client, tmp_path: Path) -> None:
    segment = _write_scenario(client, "spark-ud-stream")
    first, query = _stream(spark, client, "spark-ud-stream", tmp_path / "cp")
    with pytest.raises(Exception, match=rf"segment {segment} offset 100"):
        query.awaitTermination()
    # Micro-batches of 50: [0, 50) and [50, 100) committed, [100, 150) failed.
    assert [r["offset"] for r in first.rows] == list(range(BAD_OFFSET))
    again, query = _stream(spark, client, "spark-ud-stream", tmp_path / "cp",
                           onDeserializationError="raw")
    query.awaitTermination()
    assert [r["offset"] for r in again.rows] == list(range(BAD_OFFSET, 2 * BAD_OFFSET + 1))
    assert again.rows[0]["value"] is None and again.rows[0]["payload"] == BAD
