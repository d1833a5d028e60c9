"""Exactly-once writes: task retries never duplicate rows, a failed job shows nothing
(and holds no read_committed reader), a replayed micro-batch commits nothing (and sweeps
what attempts of it before left open)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark import TaskContext, cloudpickle
from pyspark.sql.functions import udf

import folio
from folio.spark import FolioDataSource
from folio.spark._options import WriteOptions
from folio.spark.sink import FolioCommitMessage, FolioWriter, query_label
from tests.spark._topics import payloads, read_committed_now

# The UDF and classes below travel to the workers by value (workers cannot import tests).
cloudpickle.register_pickle_by_value(sys.modules[__name__])


class _FlakyWriter(FolioWriter):
    """The real writer, but the first attempt of partition 0 fails after 60 rows (and so
    after three flushes of 20 uncommitted events)."""

    def write(self, iterator: Iterator[Any]) -> FolioCommitMessage:
        context = TaskContext.get()
        if context is None or context.partitionId() != 0 or context.attemptNumber() != 0:
            return super().write(iterator)

        def failing() -> Iterator[Any]:
            seen = 0
            for batch in iterator:
                yield batch
                seen += batch.num_rows
                if seen >= 60:
                    raise RuntimeError("injected failure of the first attempt")

        return super().write(failing())


class _FlakySource(FolioDataSource):
    @classmethod
    def name(cls) -> str:
        return "folio_flaky"

    def writer(self, schema: Any, overwrite: bool) -> FolioWriter:
        return _FlakyWriter(WriteOptions.parse(self.options))


def _always_fail_partition_1(n: int) -> str:
    context = TaskContext.get()
    if context is not None and context.partitionId() == 1 and n % 200 >= 120:
        raise RuntimeError("injected failure of every attempt")
    return f"row-{n}"


def test_a_retried_task_writes_each_row_once(spark: Any, client: folio.Client) -> None:
    client.create_topic("sink-retry", segments=3)
    spark.dataSource.register(_FlakySource)
    df = spark.range(0, 400, 1, 2).selectExpr("concat('row-', id) as payload",
                                             "cast(id % 13 as string) as routing_key")
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "10")
    try:
        (df.write.format("folio_flaky").option("endpoint", client.endpoint)
         .option("topic", "sink-retry").option("flushEvents", "20").mode("append").save())
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    assert payloads(client, "sink-retry") == sorted(f"row-{n}".encode() for n in range(400))
    # The failed attempt had sent 60 events (flushEvents=20); they were aborted, never shown.
    written = payloads(client, "sink-retry", "read_uncommitted")
    assert len(written) == 460
    assert set(written) == {f"row-{n}".encode() for n in range(400)}


def test_a_failed_job_leaves_nothing_visible(spark: Any, client: folio.Client) -> None:
    client.create_topic("sink-failed", segments=2)
    doomed = udf(_always_fail_partition_1, "string", useArrow=False)
    df = spark.range(0, 400, 1, 2).select(doomed("id").alias("payload"))
    with pytest.raises(Exception, match="injected failure of every attempt"):
        (df.write.format("folio").option("endpoint", client.endpoint)
         .option("topic", "sink-failed").option("flushEvents", "20")
         .mode("append").save())  # the default txnTimeoutMs: 15 minutes
    # Every transaction is aborted at once: by its failed attempt, or by the job's abort,
    # which also sweeps the job's label (attempts whose commit message Spark dropped, as
    # for a stage run again after the failure). No read_committed reader is held: events
    # written after the job are read right away, and nothing of the job.
    with client.writer("sink-failed") as writer:
        for n in range(10):
            writer.write_event(b"after", routing_key=f"k{n}")
    assert read_committed_now(client, "sink-failed", 10) == [b"after"] * 10
    assert payloads(client, "sink-failed") == [b"after"] * 10
    # Partition 0's attempt wrote its rows (then swept), or began after the job's abort had
    # closed the label and was refused: either way only read_uncommitted shows them.
    uncommitted = payloads(client, "sink-failed", "read_uncommitted")
    assert uncommitted.count(b"after") == 10
    assert set(uncommitted) - {b"after"} <= {f"row-{n}".encode() for n in range(200)}


def test_overwrite_and_a_missing_payload_column_are_refused(spark: Any,
                                                            client: folio.Client) -> None:
    client.create_topic("sink-refused", segments=1)
    df = spark.range(3).selectExpr("cast(id as string) as payload")
    writer = df.write.format("folio").option("endpoint", client.endpoint) \
        .option("topic", "sink-refused")
    with pytest.raises(Exception, match="append-only"):
        writer.mode("overwrite").save()
    with pytest.raises(Exception, match="needs a 'payload' column"):
        (spark.range(3).write.format("folio").option("endpoint", client.endpoint)
         .option("topic", "sink-refused").mode("append").save())


def test_a_replayed_micro_batch_commits_nothing(spark: Any, client: folio.Client,
                                                tmp_path: Path) -> None:
    client.create_topic("sink-stream-in", segments=2)
    client.create_topic("sink-stream-out", segments=2)
    with client.writer("sink-stream-in") as writer:
        for n in range(100):
            writer.write_event(f"e{n}".encode(), routing_key=f"k{n % 7}")
    checkpoint = tmp_path / "checkpoint"

    def run() -> None:
        query = (spark.readStream.format("folio").option("endpoint", client.endpoint)
                 .option("topic", "sink-stream-in").load()
                 .selectExpr("payload", "routing_key")
                 .writeStream.format("folio").option("endpoint", client.endpoint)
                 .option("topic", "sink-stream-out")
                 .option("checkpointLocation", str(checkpoint))
                 .trigger(availableNow=True).start())
        query.awaitTermination()

    run()
    expected = sorted(f"e{n}".encode() for n in range(100))
    assert payloads(client, "sink-stream-out") == expected
    # Forget that the last batch was committed: the restarted query runs it again
    # (same batch id, new transactions), and the broker drops the repeat.
    commits = sorted((checkpoint / "commits").iterdir(), key=lambda p: p.name)
    last = [p for p in commits if p.name.isdigit()][-1]
    last.unlink()
    for crc in (checkpoint / "commits").glob(f".{last.name}.crc"):
        crc.unlink()
    # An attempt before the "crash" left its transaction open (its commit message never
    # reached the driver): the replay's sweep of the query's label aborts it.
    query_id = json.loads((checkpoint / "metadata").read_text().splitlines()[0])["id"]
    with client.transactional_writer("sink-stream-out") as txn_writer:
        orphan = txn_writer.begin(label=query_label(f"spark-query-{query_id}"))
        orphan.write_event(b"orphan", routing_key="k0")
        orphan_id = orphan.detach()
    run()
    assert (checkpoint / "commits" / last.name).exists()  # the batch did run again
    assert client.transaction_status(orphan_id) == "ABORTED"
    assert payloads(client, "sink-stream-out") == expected
    assert len(payloads(client, "sink-stream-out", "read_uncommitted")) == 201
