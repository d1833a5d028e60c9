"""A bookie in this process: validation and asyncio on top of ``RocksDBLedgerStorage``.

``Bookie`` satisfies ``ledger.api.BookieClient`` directly, so a standalone
broker's ledger handles use it with no gRPC hop, and the gRPC servicer
(``ledger.bookie.service``) is a thin translation onto the same object.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from rocksdict import Options, Rdict

from ledger import metrics
from ledger.api import AddRequest, LedgerTail, ReadResult
from ledger.bookie.replies import LoopReply
from ledger.bookie.storage import AddOp, DeleteOp, FenceOp, ProbeOp, RocksDBLedgerStorage
from ledger.config import BookieConfig
from ledger.errors import EntryTooLargeError, InvalidArgumentError, StorageError

__all__ = ["Bookie"]

log = logging.getLogger(__name__)


def _check_ledger_id(ledger_id: int) -> None:
    if ledger_id < 0:
        raise InvalidArgumentError(f"ledger_id must be >= 0, got {ledger_id}")


class Bookie:
    """One bookie: its storage and the checks every request passes first.

    Args:
        config: where and how the bookie stores data.
        bookie_id: the identity ledger metadata records for this bookie.
        open_kv: opens the RocksDB store (default ``Rdict``); tests pass a
            fault-injecting wrapper (``tests/support/faulty_kv.py``).
    """

    def __init__(self, config: BookieConfig, bookie_id: str = "local", *,
                 open_kv: Callable[[str, Options], Rdict] | None = None) -> None:
        self._config = config
        self._bookie_id = bookie_id
        self._storage = RocksDBLedgerStorage(config, open_kv)
        metrics.watch_storage(self)

    @property
    def bookie_id(self) -> str:
        """The identity recorded in ledger ensembles."""
        return self._bookie_id

    @property
    def config(self) -> BookieConfig:
        """The configuration this bookie runs with."""
        return self._config

    def ledger_ids(self) -> list[int]:
        """Every ledger this bookie holds state for."""
        return self._storage.ledger_ids()

    async def add_entries(self, request: AddRequest) -> None:
        """See ``BookieClient.add_entries``."""
        _check_ledger_id(request.ledger_id)
        entry_ids = request.entry_ids
        count = len(entry_ids)
        if count == 0:
            raise InvalidArgumentError(
                "an add needs at least one entry", ledger_id=request.ledger_id
            )
        if len(request.datas) != count or len(request.lengths) != count:
            raise InvalidArgumentError(
                "entry ids, lengths and data differ in count", ledger_id=request.ledger_id
            )
        if not isinstance(entry_ids, range):
            previous = -1
            for entry_id in entry_ids:
                if entry_id <= previous:
                    raise InvalidArgumentError(
                        f"entry ids must be >= 0 and increasing, got {entry_id} after {previous}",
                        ledger_id=request.ledger_id,
                    )
                previous = entry_id
        elif entry_ids.start < 0 or entry_ids.step != 1:
            raise InvalidArgumentError(
                f"entry ids must be >= 0 and increasing, got {entry_ids}",
                ledger_id=request.ledger_id,
            )
        if min(request.lengths) < 0:
            raise InvalidArgumentError("entry lengths must be >= 0", ledger_id=request.ledger_id)
        limit = self._config.max_entry_bytes
        largest = max(map(len, request.datas))
        if largest > limit:
            raise EntryTooLargeError(largest, limit, ledger_id=request.ledger_id)
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._storage.submit(AddOp(request, LoopReply(future)))
        await future

    async def read_entries(
        self, ledger_id: int, first_entry_id: int, last_entry_id: int,
        *, fence: bool = False, max_bytes: int = 0,
    ) -> ReadResult:
        """See ``BookieClient.read_entries``."""
        _check_ledger_id(ledger_id)
        if first_entry_id < 0 or last_entry_id < first_entry_id:
            raise InvalidArgumentError(
                f"bad entry range [{first_entry_id}, {last_entry_id}]", ledger_id=ledger_id
            )
        if max_bytes < 0:
            raise InvalidArgumentError(f"max_bytes must be >= 0, got {max_bytes}",
                                       ledger_id=ledger_id)
        if fence:
            await self.fence(ledger_id)
        return self._storage.read(ledger_id, first_entry_id, last_entry_id, max_bytes)

    async def read_last_add_confirmed(self, ledger_id: int) -> LedgerTail:
        """See ``BookieClient.read_last_add_confirmed``."""
        _check_ledger_id(ledger_id)
        return self._storage.tail(ledger_id)

    async def fence(self, ledger_id: int) -> LedgerTail:
        """See ``BookieClient.fence``."""
        _check_ledger_id(ledger_id)
        future: asyncio.Future[LedgerTail] = asyncio.get_running_loop().create_future()
        self._storage.submit(FenceOp(ledger_id, LoopReply(future)))
        return await future

    async def delete_ledger(self, ledger_id: int) -> None:
        """See ``BookieClient.delete_ledger``."""
        _check_ledger_id(ledger_id)
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._storage.submit(DeleteOp(ledger_id, LoopReply(future)))
        await future

    @property
    def storage_failure(self) -> StorageError | None:
        """Why the storage refuses writes now (its RocksDB/OS error), or None."""
        return self._storage.failure

    async def probe_storage(self) -> None:
        """Ask a failed storage to probe now (see ``ledger.bookie.storage``); no-op when healthy.

        Raises:
            StorageError: it still refuses writes.
        """
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._storage.submit(ProbeOp(LoopReply(future)))
        await future

    async def close(self) -> None:
        """A client's close: the in-process bookie keeps running (see ``shutdown``)."""

    def shutdown(self) -> None:
        """Finish queued writes and close the storage."""
        self._storage.close()
