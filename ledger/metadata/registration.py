"""Registrations: an ephemeral node kept for as long as its process lives, and who is live.

A bookie registers at ``/bookies/available/<id>`` (and records itself at
``/bookies/all/<id>``), a broker at ``/brokers/<id>`` (``cluster_layout``).
``EphemeralRegistration`` creates the node, and creates it again when the
session expired and the store reconnected with a new one (ZooKeeper deleted
the node with the old session). ``live_registrations`` reads who is there.

A process restarted quickly after a crash finds its own node still there,
held by its dead session until that session times out; ``start`` waits for it
to vanish (up to ``takeover_timeout_ms``) rather than fail or delete it: a
node it cannot tell from a live twin's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from ledger.api import EventType, MetadataStore, SessionState
from ledger.errors import (
    LedgerError,
    MetadataError,
    MetadataUnavailableError,
    NodeExistsError,
    NoNodeError,
)
from ledger.metadata.cluster_layout import Registration
from ledger.tasks import cancel_and_wait

__all__ = ["EphemeralRegistration", "RegistrationConflictError", "live_registrations"]

log = logging.getLogger(__name__)

#: How long ``close`` tries to delete the node before leaving it to the session's end.
_CLOSE_TIMEOUT_S = 5.0


class RegistrationConflictError(MetadataError):
    """Another live process holds the same registration (same id)."""


class EphemeralRegistration:
    """An ephemeral node at ``path`` holding ``data``, re-created after a session expiry.

    Args:
        store: the cluster's metadata store.
        path: the node (its parent must exist).
        data: its data.
        takeover_timeout_ms: how long ``start`` waits for a node left by a
            previous session (a crashed process of the same id) to expire.
    """

    def __init__(self, store: MetadataStore, path: str, data: bytes, *,
                 takeover_timeout_ms: int = 30_000) -> None:
        self._store = store
        self.path = path
        self._data = data
        self._takeover_timeout_s = takeover_timeout_ms / 1000
        self._lost = False
        self._closed = False
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Create the node, waiting for a stale one to expire.

        Raises:
            RegistrationConflictError: the node is still there after the takeover timeout.
            MetadataError: the store failed.
        """
        await self._create(wait_s=self._takeover_timeout_s)
        self._store.add_session_listener(self._on_session)

    async def _create(self, wait_s: float) -> None:
        deadline = time.monotonic() + wait_s
        vanished = asyncio.Event()

        def on_change(event: EventType, path: str) -> None:
            vanished.set()

        while True:
            try:
                await self._store.create(self.path, self._data, ephemeral=True)
                log.info("registered %s", self.path)
                return
            except NodeExistsError:
                pass  # a previous session's, or ours: a create whose answer was lost
            except MetadataUnavailableError:
                pass  # maybe created: the read below tells
            vanished.clear()
            try:
                node = await self._store.get(self.path, watch=on_change)
            except NoNodeError:
                continue  # gone already (or never created): create again
            if node.data == self._data:
                # Ours: the data holds this process's start time, and a node of an
                # expired session of ours is gone before CONNECTED reports the new one.
                log.info("registered %s (the create's answer was lost)", self.path)
                return
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RegistrationConflictError(
                    f"{self.path} is held by another session for more than "
                    f"{wait_s:g} s: is another process running with the same id?")
            log.info("%s is held by a previous session; waiting up to %.0f s for it to expire",
                     self.path, remaining)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(vanished.wait(), min(remaining, 1.0))

    def _on_session(self, state: SessionState) -> None:
        # On the store's loop. After LOST the node is gone with the old session;
        # once CONNECTED again (a new session) it is created anew.
        if state is SessionState.LOST:
            self._lost = True
        elif state is SessionState.CONNECTED and self._lost and not self._closed:
            self._lost = False
            if self._task is None or self._task.done():
                self._task = asyncio.get_running_loop().create_task(self._recreate())

    async def _recreate(self) -> None:
        try:
            await self._create(wait_s=self._takeover_timeout_s)
        except LedgerError:
            # The store goes on reconnecting; the next CONNECTED after a LOST retries.
            log.exception("could not register %s again after the session expired", self.path)
            self._lost = True

    async def close(self) -> None:
        """Delete the node (its session's close would too). Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._store.remove_session_listener(self._on_session)
        if self._task is not None:
            with contextlib.suppress(LedgerError):
                await cancel_and_wait(self._task)
        # Best effort and bounded: with ZooKeeper out of reach the node goes anyway
        # when the session ends, and a stopping process must not wait for it.
        with contextlib.suppress(NoNodeError, MetadataError, TimeoutError):
            await asyncio.wait_for(self._store.delete(self.path), _CLOSE_TIMEOUT_S)


async def live_registrations(store: MetadataStore, parent: str) -> dict[str, Registration]:
    """The registrations under ``parent`` by id (children that vanish meanwhile are left out).

    Raises:
        NoNodeError: ``parent`` does not exist.
        MetadataError: a record is unreadable, or the store failed.
    """
    found: dict[str, Registration] = {}
    for name in await store.children(parent):
        path = f"{parent}/{name}"
        try:
            node = await store.get(path)
        except NoNodeError:
            continue
        found[name] = Registration.decode(path, node.data)
    return found
