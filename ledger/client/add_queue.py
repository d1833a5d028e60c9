"""AddQueue: the entries a handle was given in this turn of the event loop.

``LedgerHandle.add_async`` only queues; the handle takes the queue as one
``AddRun`` (consecutive entry ids from ``next_entry_id``) when the turn ends or
the queue reaches ``max_add_request_bytes``, and sends it to the bookies as one
request each. The queue numbers the entries and keeps the running byte length
that the ledger's metadata records at the close.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from ledger.errors import LedgerError

__all__ = ["AddQueue", "AddRun"]


@dataclass(slots=True, eq=False)
class AddRun:
    """Consecutive entries sent together, waiting for their quorum."""

    first_entry_id: int
    datas: list[bytes]
    #: The ledger's length in bytes up to and including each entry.
    lengths: list[int]
    futures: list[asyncio.Future[int]]
    #: Ensemble positions that acknowledged everything of the run sent to them.
    acked: set[int] = field(default_factory=set)
    sent: bool = False


class AddQueue:
    """Entries queued but not yet taken as a run, numbered from ``next_entry_id``."""

    def __init__(self, next_entry_id: int) -> None:
        self._next_entry_id = next_entry_id
        self._length = 0
        self._datas: list[bytes] = []
        self._lengths: list[int] = []
        self._futures: list[asyncio.Future[int]] = []
        self._bytes = 0
        self._scheduled = False

    @property
    def next_entry_id(self) -> int:
        """The entry id the next run taken starts at."""
        return self._next_entry_id

    def put(self, data: bytes, future: asyncio.Future[int]) -> int:
        """Queue ``data``, settled by ``future``; the bytes queued now."""
        self._length += len(data)
        self._datas.append(data)
        self._lengths.append(self._length)
        self._futures.append(future)
        self._bytes += len(data)
        return self._bytes

    def schedule(self) -> bool:
        """True if no take is scheduled yet (the caller schedules one now)."""
        if self._scheduled:
            return False
        self._scheduled = True
        return True

    def take(self) -> AddRun | None:
        """The queued entries as one run (numbered), or None if nothing is queued."""
        self._scheduled = False
        if not self._datas:
            return None
        run = AddRun(self._next_entry_id, self._datas, self._lengths, self._futures)
        self._next_entry_id += len(self._datas)
        self._datas, self._lengths, self._futures = [], [], []
        self._bytes = 0
        return run

    def fail(self, error: LedgerError) -> None:
        """Fail every queued entry's future with ``error`` and drop the entries."""
        for future in self._futures:
            if not future.done():
                future.set_exception(error)
        self._datas, self._lengths, self._futures = [], [], []
