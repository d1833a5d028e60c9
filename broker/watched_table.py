"""A table every broker reads, kept in one metadata-store node: watched, changed by compare-and-set.

The grants (``broker.auth.acl_store``) and the Kafka client quotas
(``broker.kafka.quotas.store``) each live in one node holding a versioned
table, so a change is one atomic compare-and-set and every broker of a
cluster reads the same table. Each broker keeps the decoded table in memory
(``table``), read by its checks without touching the store. A one-shot watch
(re-armed on every firing, as ZooKeeper's are) reloads it when another
broker changed it; this broker's own changes count at once.

Outcomes of a change: the compare-and-set applied (yes), lost to another
writer (``BadVersionError``: read again and re-apply, bounded), or failed
with the store unreachable (``LedgerError``, ``MetadataUnavailableError``
among them: maybe applied), which is passed up to the caller. A watch firing
while the store is unreachable leaves the table as it was, logs, and reads
again (backing off up to 30 s) until a read succeeds and re-arms the watch.
At start, a create or read the store did not answer
(``MetadataUnavailableError``: the create may have been applied) is tried
again, backing off, for up to ``_START_DEADLINE_S``: an applied create then
answers "exists", and the read takes what is there. A broker started while
ZooKeeper's connection blinks waits for it instead of exiting.

It uses only ``ledger.api.MetadataStore``, so the embedded RocksDB store and
the ZooKeeper one serve it alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Final, Generic, Protocol, Self, TypeVar

from ledger.api import EventType, MetadataStore
from ledger.errors import (
    BadVersionError,
    LedgerError,
    MetadataUnavailableError,
    NodeExistsError,
    NoNodeError,
)

__all__ = ["VersionedTable", "WatchedTable"]

log = logging.getLogger(__name__)

#: Compare-and-set attempts before a change gives up (others changing it meanwhile).
_MAX_ATTEMPTS: Final = 20
#: Seconds between reloads that failed (doubling up to the last).
_FIRST_RETRY_S: Final = 0.5
_LAST_RETRY_S: Final = 30.0
#: How long ``start`` tries again when the store does not answer (a ZooKeeper
#: session lasts 30 s by default: longer, and the session itself is gone).
_START_DEADLINE_S: Final = 60.0


class VersionedTable(Protocol):
    """An immutable table that knows the node version it was read from."""

    @property
    def version(self) -> int: ...

    def encode(self) -> bytes: ...

    @classmethod
    def decode(cls, data: bytes, version: int) -> Self: ...


T = TypeVar("T", bound=VersionedTable)


class WatchedTable(Generic[T]):
    """The node at ``path``: ``table`` now (``empty`` until read), and ``change``.

    ``what`` names the table in log lines ("the client quotas").
    """

    def __init__(self, store: MetadataStore, path: str, empty: T, what: str) -> None:
        self._store = store
        self._path = path
        self._empty = empty
        self._what = what
        self.table = empty
        self._closed = False
        self._reloads: set[asyncio.Task[None]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None

    async def start(self, deadline_s: float = _START_DEADLINE_S) -> None:
        """Create the node if missing, read it and watch it.

        A call the store did not answer is tried again for up to
        ``deadline_s`` (module docstring); then, or on another failure,
        ``LedgerError``.
        """
        loop = self._loop = asyncio.get_running_loop()
        give_up, delay = loop.time() + deadline_s, _FIRST_RETRY_S
        while True:
            try:
                with contextlib.suppress(NodeExistsError):  # made before, or by a lost answer
                    await self._store.create(self._path, self._empty.encode(),
                                             make_parents=True)
                await self._reload()
                return
            except MetadataUnavailableError as error:
                if loop.time() + delay > give_up:
                    raise
                log.warning("%s: the metadata store did not answer at start (again in %.1f "
                            "s): %s", self._what, delay, error)
            await asyncio.sleep(delay)
            delay = min(delay * 2, _LAST_RETRY_S)

    async def close(self) -> None:
        """Stop watching."""
        self._closed = True
        for task in list(self._reloads):
            task.cancel()

    async def change(self, edit: Callable[[T], T]) -> T:
        """Apply ``edit`` to the stored table by compare-and-set (re-applied if another won).

        Raises ``LedgerError`` when the store does not answer (maybe applied),
        ``BadVersionError`` when others changed it ``_MAX_ATTEMPTS`` times meanwhile.
        """
        for _attempt in range(_MAX_ATTEMPTS):
            try:
                node = await self._store.get(self._path)
            except NoNodeError:
                with contextlib.suppress(NodeExistsError):
                    await self._store.create(self._path, self._empty.encode(),
                                             make_parents=True)
                continue
            data = edit(type(self._empty).decode(node.data, node.version)).encode()
            try:
                version = await self._store.set(self._path, data, node.version)
            except (BadVersionError, NoNodeError):
                continue  # another broker changed it meanwhile: apply to the new one
            changed = type(self._empty).decode(data, version)
            if version >= self.table.version:
                self.table = changed
            return changed
        raise BadVersionError(self._path, -1, None)

    async def refresh(self) -> T:
        """Read the node now (after a change whose outcome was unknown: did it land?).

        Raises ``LedgerError`` when the store does not answer.
        """
        await self._reload()
        return self.table

    async def _reload(self) -> None:
        if self._closed:
            return
        try:
            node = await self._store.get(self._path, watch=self._changed)
        except NoNodeError:
            self.table = self._empty
            return
        if node.version >= self.table.version:
            self.table = type(self._empty).decode(node.data, node.version)

    async def _reload_logged(self) -> None:
        """Reload after a watch fired, retried until it succeeds (its get re-arms the watch)."""
        delay = _FIRST_RETRY_S
        while not self._closed:
            try:
                await self._reload()
                return
            except (LedgerError, ValueError) as error:
                log.warning("%s could not be reloaded (kept as they were; again in %.1f s): "
                            "%s", self._what, delay, error)
            await asyncio.sleep(delay)
            delay = min(delay * 2, _LAST_RETRY_S)

    def _changed(self, _event: EventType, _path: str) -> None:
        # A watch callback must not block, and may come from the store's own
        # thread (ZooKeeper's): reload in a task on the broker's loop.
        if self._closed or self._loop is None:
            return
        with contextlib.suppress(RuntimeError):  # the loop closed: the broker stopped
            self._loop.call_soon_threadsafe(self._spawn_reload)

    def _spawn_reload(self) -> None:
        task = asyncio.get_running_loop().create_task(self._reload_logged())
        self._reloads.add(task)
        task.add_done_callback(self._reloads.discard)
