"""Health follows the in-process bookie's storage: NOT_SERVING while it refuses writes.

A full disk or a data dir made read-only fails the bookie's writes
(``ledger.bookie.storage``): every append then fails with the storage's error
(UNAVAILABLE, ``StorageError``, the OS/RocksDB text). This watch turns the
broker's health NOT_SERVING meanwhile, so load balancers and orchestrators
see it, and keeps asking the storage to probe (a tiny synced write) so that
it recovers by itself once the disk takes writes again, without waiting for
a client's write. Segments whose ledger failed are reloaded with a fresh
ledger on their next use (``broker.topics.manager``), after recovery closed the
failed one at what it durably holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence

from grpc_health.v1 import health_pb2

# The asyncio health servicer (grpc_health exposes it as ``health.aio``).
from grpc_health.v1._async import HealthServicer as AsyncHealthServicer

from ledger.bookie.bookie import Bookie
from ledger.client.directory import BookieDirectory
from ledger.errors import StorageError
from ledger.tasks import cancel_and_wait

__all__ = ["StorageWatch"]

log = logging.getLogger(__name__)

_SERVING = health_pb2.HealthCheckResponse.SERVING
_NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


class StorageWatch:
    """Polls ``bookie``'s storage every ``interval_s``; sets ``health`` of ``services``."""

    def __init__(self, bookie: Bookie, health: AsyncHealthServicer, services: Sequence[str],
                 directory: BookieDirectory | None = None, interval_s: float = 0.5) -> None:
        self._bookie = bookie
        self._directory = directory
        self._health = health
        self._services = tuple(services)
        self._interval_s = interval_s
        self._failed = False
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start polling (on the running loop)."""
        self._task = asyncio.create_task(self._run(), name="storage-watch")

    async def close(self) -> None:
        """Stop polling; health is left as it is (the server's stop sets it)."""
        if self._task is not None:
            await cancel_and_wait(self._task)

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._interval_s)
            await self.check()

    async def check(self) -> None:
        """One round: probe a failed storage, and set health to match."""
        failure = self._bookie.storage_failure
        if failure is not None:
            with contextlib.suppress(StorageError):
                await self._bookie.probe_storage()
            failure = self._bookie.storage_failure
        if (failure is not None) == self._failed:
            return
        self._failed = failure is not None
        if failure is not None:
            log.error("storage failed, health NOT_SERVING until it takes writes again: %s",
                      failure)
        else:
            log.warning("storage takes writes again: health SERVING")
            if self._directory is not None:
                # Its adds failed, so ledgers left it out; it may take new ones now.
                self._directory.mark_recovered(self._bookie.bookie_id)
        for name in ("", *self._services):
            await self._health.set(name, _NOT_SERVING if self._failed else _SERVING)
