"""A topic manager's parts built by hand, for the tests of each part alone.

``Parts`` wires ``LoadedSegments``, ``TopicCatalog``, ``TopicCrud`` and
``TopicScaling`` on the ledger stack of ``conftest.py`` as ``TopicManager``
does, with a switch for the owner's close. A ``TopicManager`` on the same
stack holds the transaction buffers' snapshot store (a system topic), which
the table makes when its first user segment loads.
"""

from __future__ import annotations

import functools

from broker.errors import BrokerShuttingDownError
from broker.system.snapshot_store import snapshot_store
from broker.topics.catalog import TopicCatalog
from broker.topics.crud import TopicCrud
from broker.topics.loaded import LoadedSegments
from broker.topics.manager import TopicManager
from broker.topics.scale import TopicScaling
from ledger.api import MetadataStore
from tests.unit.broker.conftest import BrokerEnv
from txnbuffer.api import SnapshotPolicy

DAY_MS = 24 * 3600 * 1000


class Parts:
    """The parts of one topic manager on ``env`` (its ``store`` unless one is given)."""

    def __init__(self, env: BrokerEnv, topics: TopicManager, *,
                 store: MetadataStore | None = None) -> None:
        self.closed = False
        store = env.store if store is None else store
        self.loaded = LoadedSegments(
            env.ledgers, store, check_open=self.check_open, clock=env.clock,
            writer_expiry_ms=DAY_MS, txn_snapshots=SnapshotPolicy(),
            make_txn_store=functools.partial(snapshot_store, topics), reload_fenced=False)
        self.catalog = TopicCatalog(env.ledgers, store, self.loaded)
        self.crud = TopicCrud(store, self.catalog, self.loaded, clock=env.clock,
                              check_open=self.check_open)
        self.scaling = TopicScaling(self.catalog, self.loaded, check_open=self.check_open)

    def check_open(self) -> None:
        """The owner's check: refuses once ``closed`` is set."""
        if self.closed:
            raise BrokerShuttingDownError("the broker is shutting down")

    async def close(self) -> None:
        """Close the segments this table loaded."""
        await self.loaded.close()
