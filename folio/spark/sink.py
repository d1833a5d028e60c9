"""Exactly-once writes: every Spark task writes in its own Folio transaction.

A task (``write``, on a worker) begins a transaction, writes its rows into it
(sent every ``flushEvents`` rows, still invisible), and hands it over
(``Transaction.detach``): its commit message carries the transaction id. If
the task fails, its transaction is aborted (or, if the worker died, its
timeout aborts it): a failed or retried attempt never shows. The driver's
``commit`` commits the transactions of the successful attempts with ONE
``CommitTxn`` (one coordinator record decides them all); ``abort`` aborts them.

A streaming sink commits micro-batch ``batchId`` with ``commit_key`` (the
query) and ``commit_sequence`` (``batchId``): the broker remembers the batches
it committed, so a batch the query replays after a restart commits nothing
and its new transactions are aborted.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from folio.client import Client
from folio.errors import FolioError, InvalidArgumentError
from folio.spark._options import WriteOptions
from folio.txn_full import Transaction

__all__ = ["FolioCommitMessage", "FolioStreamWriter", "FolioWriter", "query_commit_key"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FolioCommitMessage(WriterCommitMessage):
    """What a successful task attempt tells the driver.

    Attributes:
        txn_id: its open transaction (None when it had no rows).
        events: how many events it wrote.
    """

    txn_id: bytes | None
    events: int


def _headers(value: Any) -> dict[str, bytes] | None:
    if not value:
        return None
    return {name: data.encode() if isinstance(data, str) else bytes(data)
            for name, data in value}


def write_task(options: WriteOptions, batches: Iterator[pa.RecordBatch]) -> FolioCommitMessage:
    """Writes the task's rows in one transaction and detaches it (module docstring)."""
    with Client(options.endpoint) as client:
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
                    txn = writer.begin()
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
    return FolioCommitMessage(txn_id, count)


def _txn_ids(messages: list[WriterCommitMessage | None]) -> list[bytes]:
    return [m.txn_id for m in messages if isinstance(m, FolioCommitMessage) and m.txn_id]


def _abort_all(options: WriteOptions, messages: list[WriterCommitMessage | None]) -> None:
    ids = _txn_ids(messages)
    if not ids:
        return
    with Client(options.endpoint) as client:
        for txn_id in ids:
            try:
                client.abort_transaction(txn_id)
            except FolioError as error:  # decided already, or timed out
                log.info("aborting transaction %s: %s", txn_id.hex(), error)


class FolioWriter(DataSourceArrowWriter):
    """``df.write.format("folio")``: the whole job's rows appear at once, or none."""

    def __init__(self, options: WriteOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> FolioCommitMessage:
        return write_task(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        ids = _txn_ids(messages)
        if ids:
            with Client(self.options.endpoint) as client:
                client.commit_transactions(ids)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        _abort_all(self.options, messages)


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
        return write_task(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        ids = _txn_ids(messages)
        if not ids:
            return
        key = query_commit_key(self.options)
        with Client(self.options.endpoint) as client:
            if not client.commit_transactions(ids, commit_key=key, commit_sequence=batchId):
                log.info("micro-batch %d of %s was committed before: its replay was dropped",
                         batchId, key)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        _abort_all(self.options, messages)
