"""The client quotas in the metadata store: one node, changed by compare-and-set, watched.

Every quota lives in one node, ``/folio/kafka/quotas`` (``QuotaTable.encode``:
versioned JSON), so a change is one atomic compare-and-set and every broker
of a cluster reads the same table, as the grants (``broker.auth.acl_store``)
and the SCRAM credentials do. Each broker keeps the decoded table in memory
(``table``): Produce and Fetch look their quotas up there, reading no store.
A one-shot watch (re-armed on every firing) reloads it when another broker
changed it; this broker's own changes count at once.

Outcomes of a change: the compare-and-set applied (yes), lost to another
writer (``BadVersionError``: read again and re-apply, bounded), or failed
with the store unreachable (``LedgerError``, ``MetadataUnavailableError``
among them: maybe applied). The last is passed up: AlterClientQuotas answers
it with the retriable REQUEST_TIMED_OUT, and a retry is safe (setting a
value again, or removing a removed one, changes nothing). A watch firing
while the store is unreachable leaves the table as it was, logs, and reads
again (backing off up to 30 s) until a read succeeds and re-arms the watch.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Final

from broker.kafka.quotas.table import QuotaTable
from broker.metadata_paths import QUOTAS_PATH
from ledger.api import EventType, MetadataStore
from ledger.errors import BadVersionError, LedgerError, NodeExistsError, NoNodeError

__all__ = ["QuotaStore"]

log = logging.getLogger(__name__)

#: Compare-and-set attempts before a change gives up (others changing it meanwhile).
_MAX_ATTEMPTS: Final = 20
#: Seconds between reloads that failed (doubling up to the last).
_FIRST_RETRY_S: Final = 0.5
_LAST_RETRY_S: Final = 30.0


class QuotaStore:
    """The broker's view of the client quotas: ``table`` now, and changes by compare-and-set."""

    def __init__(self, store: MetadataStore) -> None:
        self._store = store
        self.table = QuotaTable()
        self._closed = False
        self._reloads: set[asyncio.Task[None]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None

    async def start(self) -> None:
        """Create the node if missing, read it and watch it (``LedgerError`` if unreachable)."""
        self._loop = asyncio.get_running_loop()
        with contextlib.suppress(NodeExistsError):
            await self._store.create(QUOTAS_PATH, QuotaTable().encode(), make_parents=True)
        await self._reload()

    async def close(self) -> None:
        """Stop watching."""
        self._closed = True
        for task in list(self._reloads):
            task.cancel()

    async def change(self, edit: Callable[[QuotaTable], QuotaTable]) -> QuotaTable:
        """Apply ``edit`` to the stored table by compare-and-set (re-applied if another won).

        Raises ``LedgerError`` when the store does not answer (maybe applied),
        ``BadVersionError`` when others changed it ``_MAX_ATTEMPTS`` times meanwhile.
        """
        for _attempt in range(_MAX_ATTEMPTS):
            try:
                node = await self._store.get(QUOTAS_PATH)
            except NoNodeError:
                with contextlib.suppress(NodeExistsError):
                    await self._store.create(QUOTAS_PATH, QuotaTable().encode(),
                                             make_parents=True)
                continue
            changed = edit(QuotaTable.decode(node.data, node.version))
            try:
                version = await self._store.set(QUOTAS_PATH, changed.encode(), node.version)
            except (BadVersionError, NoNodeError):
                continue  # another broker changed it meanwhile: apply to the new one
            if version >= self.table.version:
                self.table = QuotaTable(changed.entries, version)
            return changed
        raise BadVersionError(QUOTAS_PATH, -1, None)

    async def _reload(self) -> None:
        if self._closed:
            return
        try:
            node = await self._store.get(QUOTAS_PATH, watch=self._changed)
        except NoNodeError:
            self.table = QuotaTable()
            return
        if node.version >= self.table.version:
            self.table = QuotaTable.decode(node.data, node.version)

    async def _reload_logged(self) -> None:
        """Reload after a watch fired, retried until it succeeds (its get re-arms the watch)."""
        delay = _FIRST_RETRY_S
        while not self._closed:
            try:
                await self._reload()
                return
            except (LedgerError, ValueError) as error:
                log.warning("kafka: the client quotas could not be reloaded (kept as they "
                            "were; again in %.1f s): %s", delay, error)
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
