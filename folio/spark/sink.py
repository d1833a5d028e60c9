"""Exactly-once writes: every Spark task writes in its own Folio transaction.

A task (``write``, on a worker) begins a transaction labelled with its write
job (``begin(label=...)``), writes its rows into it (sent every ``flushEvents``
rows, still invisible), and hands it over (``Transaction.detach``): its
commit message carries the transaction id. If the task fails, its
transaction is aborted: a failed or retried attempt never shows. The
driver's ``commit`` commits the transactions of the successful attempts with
ONE ``CommitTxn`` (one coordinator record decides them all), then aborts
every other transaction still open under the job's label (``AbortTxns``):
those of attempts whose commit message never reached the driver (a killed
worker, a stage run again, a speculative duplicate, a lost message), which
would otherwise stay open until ``txnTimeoutMs`` and hold ``read_committed``
readers of the segments they touched. ``abort`` aborts the label's
transactions (and the delivered ones).

A batch write's label is a UUID the driver makes with the writer (Spark
pickles that one writer to every task and back to the driver's commit). Its
``commit`` and ``abort`` also close the label: Spark does not wait for the
tasks it cancels, and one still running would otherwise begin its
transaction after the sweep; now its ``begin`` fails instead.

A streaming sink's label is the query's commit key: tasks take the query id
from Spark's local property ``sql.streaming.queryId``, the driver from the
checkpoint. Micro-batches never overlap, so at ``commit`` of batch N every
open transaction of the query but the delivered ones is a leftover (of
batch N, of an earlier batch's straggler, or of a run before a restart) and
is swept; the label stays open for the next batches. It commits micro-batch
``batchId`` with ``commit_key`` (the query) and ``commit_sequence``
(``batchId``): the broker remembers the batches it committed, so a batch the
query replays after a restart commits nothing and its new transactions are
aborted (and swept).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from folio.client import Client
from folio.errors import FolioError, InvalidArgumentError
from folio.spark._options import WriteOptions
from folio.txn.txn_full import Transaction

__all__ = ["FolioCommitMessage", "FolioStreamWriter", "FolioWriter", "query_commit_key",
           "query_label"]

log = logging.getLogger(__name__)

#: The broker's limit on a transaction label (``MAX_TXN_LABEL_BYTES``).
_MAX_LABEL_BYTES = 256
#: Spark's local property naming a streaming query in its tasks.
_QUERY_ID_PROPERTY = "sql.streaming.queryId"


@dataclass(frozen=True)
class FolioCommitMessage(WriterCommitMessage):
    """What a successful task attempt tells the driver.

    Attributes:
        txn_id: its open transaction (None when it had no rows).
        events: how many events it wrote.
        label: the label its transaction was begun with ("" for none).
    """

    txn_id: bytes | None
    events: int
    label: str = ""


def _headers(value: Any) -> dict[str, bytes] | None:
    if not value:
        return None
    return {name: data.encode() if isinstance(data, str) else bytes(data)
            for name, data in value}


def write_task(options: WriteOptions, batches: Iterator[pa.RecordBatch],
               label: str = "") -> FolioCommitMessage:
    """Writes the task's rows in one transaction labelled ``label`` and detaches it."""
    with Client(config=options.client) as client:
        writer = client.transactional_writer(options.topic, txn_timeout_ms=options.txn_timeout_ms)
        txn: Transaction[bytes] | None = None
        count = flushed = 0
        try:
            for batch in batches:
                names = batch.schema.names
                payloads = batch.column(names.index("payload")).to_pylist()
                keys = batch.column(names.index("routing_key")).to_pylist() \
                    if "routing_key" in names else None
                headers = batch.column(names.index("headers")).to_pylist() \
                    if "headers" in names else None
                if txn is None:
                    txn = writer.begin(label=label)
                for index, payload in enumerate(payloads):
                    if payload is None:
                        raise InvalidArgumentError(f"row {count + index} has a null payload")
                    txn.write_event(payload.encode() if isinstance(payload, str) else payload,
                                    routing_key=keys[index] if keys is not None else None,
                                    headers=_headers(headers[index]) if headers else None)
                count += len(payloads)
                if count - flushed >= options.flush_events:
                    txn.flush()
                    flushed = count
            txn_id = txn.detach() if txn is not None else None
        except BaseException:
            if txn is not None:
                with contextlib.suppress(FolioError):
                    txn.abort()
            raise
    return FolioCommitMessage(txn_id, count, label)


def _txn_ids(messages: list[WriterCommitMessage | None]) -> list[bytes]:
    return [m.txn_id for m in messages if isinstance(m, FolioCommitMessage) and m.txn_id]


def _labels(label: str, messages: list[WriterCommitMessage | None]) -> list[str]:
    """``label`` and any other the delivered messages name (there should be none)."""
    labels = dict.fromkeys([label] if label else [])
    for message in messages:
        if isinstance(message, FolioCommitMessage) and message.label \
                and message.label not in labels:
            if label:
                log.warning("a task labelled its transaction %r, not %r", message.label, label)
            labels[message.label] = None
    return list(labels)


def _sweep(client: Client, labels: list[str], keep: list[bytes], close: bool) -> set[bytes]:
    """Abort the open transactions of ``labels`` but ``keep`` (best effort); their ids."""
    swept: set[bytes] = set()
    for label in labels:
        try:
            aborted = client.abort_transactions(label, keep=keep, close=close)
        except FolioError as error:  # their timeout aborts them
            log.warning("could not abort the open transactions labelled %r: %s", label, error)
            continue
        if aborted:
            log.info("aborted %d open transactions labelled %r", len(aborted), label)
        swept.update(aborted)
    return swept


def _commit(options: WriteOptions, label: str, messages: list[WriterCommitMessage | None],
            *, close: bool, commit_key: str = "", batch_id: int = 0) -> None:
    """Commit the delivered transactions (one ``CommitTxn``), then sweep (and maybe close)
    the label."""
    ids = _txn_ids(messages)
    with Client(config=options.client) as client:
        if ids and not client.commit_transactions(ids, commit_key=commit_key,
                                                  commit_sequence=batch_id):
            log.info("micro-batch %d of %s was committed before: its replay was dropped",
                     batch_id, commit_key)
        _sweep(client, _labels(label, messages), ids, close)


def _abort_all(options: WriteOptions, label: str,
               messages: list[WriterCommitMessage | None], *, close: bool) -> None:
    """Abort the label's open transactions, and the delivered ones the sweep did not."""
    ids = _txn_ids(messages)
    with Client(config=options.client) as client:
        swept = _sweep(client, _labels(label, messages), [], close)
        for txn_id in ids:
            if txn_id in swept:
                continue
            try:
                client.abort_transaction(txn_id)
            except FolioError as error:  # decided already, or timed out
                log.info("aborting transaction %s: %s", txn_id.hex(), error)


def query_label(commit_key: str) -> str:
    """The label of a streaming query's transactions: ``commit_key``, or within the
    broker's limit ``spark-query-sha256-<its SHA-256>``."""
    if len(commit_key.encode()) <= _MAX_LABEL_BYTES:
        return commit_key
    return f"spark-query-sha256-{hashlib.sha256(commit_key.encode()).hexdigest()}"


def _task_query_label(options: WriteOptions) -> str:
    """The label of this streaming task's transaction (``commitKey``, else the query id)."""
    if options.commit_key:
        return query_label(options.commit_key)
    context = TaskContext.get()
    query = context.getLocalProperty(_QUERY_ID_PROPERTY) if context is not None else None
    if query is None:
        log.warning("no query id (%s) in the task's local properties: its transaction is not "
                    "labelled, and only its timeout aborts it if the driver never hears of it",
                    _QUERY_ID_PROPERTY)
        return ""
    return query_label(f"spark-query-{query}")


class FolioWriter(DataSourceArrowWriter):
    """``df.write.format("folio")``: the whole job's rows appear at once, or none.

    Attributes:
        label: the label of the job's transactions (made here, on the driver).
    """

    def __init__(self, options: WriteOptions) -> None:
        self.options = options
        self.label = f"spark-write-{uuid.uuid4()}"

    def write(self, iterator: Iterator[pa.RecordBatch]) -> FolioCommitMessage:
        return write_task(self.options, iterator, self.label)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        _commit(self.options, self.label, messages, close=True)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        _abort_all(self.options, self.label, messages, close=True)


def query_commit_key(options: WriteOptions) -> str:
    """The commit key of a streaming query: ``commitKey``, else its id from the checkpoint.

    Spark keeps a query's id in ``<checkpointLocation>/metadata`` for the
    life of the checkpoint, so a restarted query has the same key and a new
    checkpoint (a new query) a new one.

    Raises:
        InvalidArgumentError: neither is available (a checkpoint on a
            file system this process cannot read: set ``commitKey``).
    """
    if options.commit_key:
        return options.commit_key
    location = options.checkpoint_location.removeprefix("file:")
    if location.startswith("//"):
        location = location[2:]
    path = os.path.join(location, "metadata")
    try:
        with open(path, encoding="utf-8") as file:
            query_id = json.loads(file.readline())["id"]
    except (OSError, ValueError, KeyError, TypeError):
        raise InvalidArgumentError(
            f"cannot read the query id from {path!r} (option checkpointLocation="
            f"{options.checkpoint_location!r}): give the sink option 'commitKey', unique to "
            f"the query and kept across its restarts") from None
    return f"spark-query-{query_id}"


class FolioStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("folio")``: each micro-batch committed exactly once."""

    def __init__(self, options: WriteOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> FolioCommitMessage:
        return write_task(self.options, iterator, _task_query_label(self.options))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        key = _key(self.options, messages, needed=True)
        _commit(self.options, query_label(key) if key else "", messages, close=False,
                commit_key=key, batch_id=batchId)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        key = _key(self.options, messages, needed=False)
        _abort_all(self.options, query_label(key) if key else "", messages, close=False)


def _key(options: WriteOptions, messages: list[WriterCommitMessage | None], *,
         needed: bool) -> str:
    """The query's commit key; "" when it cannot be read and the call can do without.

    Then only the labels the delivered messages name are swept. A commit with
    transactions (``needed``) cannot: it raises ``InvalidArgumentError``.
    """
    try:
        return query_commit_key(options)
    except InvalidArgumentError as error:
        if needed and _txn_ids(messages):
            raise
        log.warning("%s; sweeping only the labels the tasks reported", error)
        return ""
