"""A task attempt whose commit message never reaches the driver: its transaction is swept.

Spark sometimes never delivers a successful attempt's message to the driver's
``commit`` (a killed worker, a stage run again, a speculative duplicate). The
writers below simulate it: the task of partition 0 writes and detaches its
transaction as usual, notes the id in a file, and reports no transaction to
the driver. The driver's ``commit`` sweeps the job's label (``AbortTxns``): the
lost transaction is aborted at once, not at its timeout (the default 15
minutes here), and no read_committed reader is held.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark import TaskContext, cloudpickle

import folio
from folio.spark import FolioDataSource
from folio.spark._options import WriteOptions
from folio.spark.sink import FolioCommitMessage, FolioStreamWriter, FolioWriter
from tests.spark._topics import payloads, read_committed_now

# The classes below travel to the workers by value (workers cannot import tests).
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def _drop_partition_0(message: FolioCommitMessage, lost_to: str) -> FolioCommitMessage:
    """``message``, or for partition 0 one without its transaction (noted in ``lost_to``)."""
    context = TaskContext.get()
    if context is None or context.partitionId() != 0 or message.txn_id is None:
        return message
    with open(lost_to, "a", encoding="utf-8") as file:
        file.write(f"{message.txn_id.hex()} {message.events} {message.label}\n")
    return FolioCommitMessage(None, 0, message.label)


class _LosingWriter(FolioWriter):
    def __init__(self, options: WriteOptions, lost_to: str) -> None:
        super().__init__(options)
        self.lost_to = lost_to

    def write(self, iterator: Iterator[Any]) -> FolioCommitMessage:
        return _drop_partition_0(super().write(iterator), self.lost_to)


class _LosingStreamWriter(FolioStreamWriter):
    def __init__(self, options: WriteOptions, lost_to: str) -> None:
        super().__init__(options)
        self.lost_to = lost_to

    def write(self, iterator: Iterator[Any]) -> FolioCommitMessage:
        return _drop_partition_0(super().write(iterator), self.lost_to)


class _LosingSource(FolioDataSource):
    @classmethod
    def name(cls) -> str:
        return "folio_losing"

    def writer(self, schema: Any, overwrite: bool) -> FolioWriter:
        return _LosingWriter(WriteOptions.parse(self.options), self.options["lostto"])

    def streamWriter(self, schema: Any, overwrite: bool) -> FolioStreamWriter:
        return _LosingStreamWriter(WriteOptions.parse(self.options), self.options["lostto"])


def _lost(path: Path) -> list[tuple[bytes, int, str]]:
    """(txn id, events, label) of each transaction whose message was dropped."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return [(bytes.fromhex(i), int(n), label) for i, n, label in (ln.split() for ln in lines)]


def test_a_batch_write_sweeps_a_task_transaction_whose_message_was_lost(
        spark: Any, client: folio.Client, tmp_path: Path) -> None:
    client.create_topic("sweep-batch", segments=2)
    spark.dataSource.register(_LosingSource)
    lost_to = tmp_path / "lost"
    df = spark.range(0, 400, 1, 2).selectExpr("concat('row-', id) as payload",
                                             "cast(id % 13 as string) as routing_key")
    (df.write.format("folio_losing").option("endpoint", client.endpoint)
     .option("topic", "sweep-batch").option("lostTo", str(lost_to))
     .mode("append").save())  # the default txnTimeoutMs: 15 minutes
    [(txn_id, events, label)] = _lost(lost_to)
    assert events == 200 and label.startswith("spark-write-")
    assert client.transaction_status(txn_id) == "ABORTED"
    # Partition 1's rows (ids 200 to 399) committed; partition 0's never show.
    expected = sorted(f"row-{n}".encode() for n in range(200, 400))
    assert read_committed_now(client, "sweep-batch", 200) == expected
    assert payloads(client, "sweep-batch") == expected
    assert len(payloads(client, "sweep-batch", "read_uncommitted")) == 400
    # The job's label is closed: a straggler of the job could not begin with it now.
    with client.transactional_writer("sweep-batch") as writer, \
            pytest.raises(folio.TxnFailedError, match="closed"):
        writer.begin(label=label)


def test_a_micro_batch_sweeps_a_task_transaction_whose_message_was_lost(
        spark: Any, client: folio.Client, tmp_path: Path) -> None:
    client.create_topic("sweep-in", segments=2)
    client.create_topic("sweep-out", segments=2)
    spark.dataSource.register(_LosingSource)
    with client.writer("sweep-in") as writer:
        for n in range(100):
            writer.write_event(f"e{n}".encode(), routing_key=f"k{n % 7}")
    lost_to = tmp_path / "lost"
    query = (spark.readStream.format("folio").option("endpoint", client.endpoint)
             .option("topic", "sweep-in").load()
             .selectExpr("payload", "routing_key")
             .writeStream.format("folio_losing").option("endpoint", client.endpoint)
             .option("topic", "sweep-out").option("lostTo", str(lost_to))
             .option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    lost = _lost(lost_to)
    assert lost, "partition 0 of some micro-batch had rows"
    for txn_id, _, label in lost:
        # The task's label (from Spark's local properties) is the one the driver swept.
        assert label == f"spark-query-{query.id}"
        assert client.transaction_status(txn_id) == "ABORTED"
    written = 100 - sum(events for _, events, _ in lost)
    out = read_committed_now(client, "sweep-out", written)
    assert len(set(out)) == written and set(out) <= {f"e{n}".encode() for n in range(100)}
    assert payloads(client, "sweep-out") == out
    assert len(payloads(client, "sweep-out", "read_uncommitted")) == 100
    # The query's label stays open for its next micro-batches.
    with client.transactional_writer("sweep-out") as writer:
        writer.begin(label=f"spark-query-{query.id}").abort()
