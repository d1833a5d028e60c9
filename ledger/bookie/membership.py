"""A bookie's membership of a cluster: check the cluster, register, unregister.

``folio bookie --metadata-url zk://.../CHROOT`` opens the cluster's metadata
store (``ledger.metadata.stores.open_store``: ZooKeeper for ``zk://``) before it
serves (and refuses to start on a chroot that ``folio cluster init`` never
initialised), then, once its port is bound, registers:

- ``/bookies/all/<id>`` (persistent): written at every start, so that a bookie
  registered there but not under ``available`` is known to be gone (what
  auto-recovery looks for);
- ``/bookies/available/<id>`` (ephemeral): held for as long as its ZooKeeper
  session lives; brokers choose new ledgers' ensembles among these.

``<id>`` is the advertised address (``host:port``), also the bookie's id in
ledger metadata. Stopping deletes the ephemeral node (closing the session
would too); a SIGKILL leaves it until the session times out.
"""

from __future__ import annotations

import logging
import time

from ledger.api import MetadataStore
from ledger.errors import NodeExistsError
from ledger.metadata.cluster_config import ClusterConfig
from ledger.metadata.cluster_layout import (
    LedgerLayout,
    Registration,
    bookie_all_path,
    bookie_available_path,
    read_ledger_layout,
)
from ledger.metadata.registration import EphemeralRegistration
from ledger.metadata.stores import open_store

__all__ = ["BookieMembership"]

log = logging.getLogger(__name__)


class BookieMembership:
    """A bookie's session with the cluster. ``connect``, ``register``, ``close``."""

    def __init__(self, store: MetadataStore, layout: LedgerLayout,
                 config: ClusterConfig) -> None:
        self.store = store
        self.layout = layout
        self._config = config
        self._registration: EphemeralRegistration | None = None

    @classmethod
    async def connect(cls, config: ClusterConfig) -> BookieMembership:
        """Connect to the cluster's metadata and read its layout.

        Raises:
            MetadataError: the store unreachable (ZooKeeper), chroot missing or cluster not
                initialised (``ClusterNotInitialisedError``), each with a message
                saying what to do.
        """
        store = await open_store(config.url(),
                                 session_timeout_ms=config.metadata_session_timeout_ms)
        try:
            layout = await read_ledger_layout(store)
        except BaseException:
            await store.close()
            raise
        return cls(store, layout, config)

    async def register(self, host: str, port: int, version: str = "") -> str:
        """Register under the advertised address (default ``host:port``); return it as the id."""
        bookie_id = self._config.address(host, port)
        record = Registration(address=bookie_id, started_at_ms=int(time.time() * 1000),
                              version=version).encode()
        try:
            await self.store.create(bookie_all_path(bookie_id), record)
        except NodeExistsError:
            await self.store.set(bookie_all_path(bookie_id), record, -1)
        self._registration = EphemeralRegistration(
            self.store, bookie_available_path(bookie_id), record,
            takeover_timeout_ms=2 * self._config.metadata_session_timeout_ms + 5_000)
        await self._registration.start()
        log.info("bookie %s registered in %s", bookie_id, self._config.url())
        return bookie_id

    async def unregister(self) -> None:
        """Delete the ephemeral node (the session stays). Idempotent."""
        if self._registration is not None:
            await self._registration.close()

    async def close(self) -> None:
        """Unregister (delete the ephemeral node) and close the session. Idempotent."""
        await self.unregister()
        await self.store.close()
