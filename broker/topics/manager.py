"""TopicManager: topics, their records and their loaded segments (``broker.api.Topics``).

A topic is a record at ``/folio/topics/<name>`` listing its segments; each
segment has its own record at ``/folio/segments/<topic>/<number>``
(``broker.segments.records``). Creation writes the segment records first and
the topic record last: the topic record is the commit point, so a crash in
between leaves only segment records that a later create of the same name
overwrites. Deletion goes the other way (segments, their ledgers, then the
topic record), so a crash in between leaves a topic that deleting again
finishes.

Segments are loaded (recovered, ``LedgerSegment.load``) on first use, one load
at a time per segment, and cached. A background task rolls ledgers over by age,
applies retention and forgets idle writers of the loaded segments every
``retention_interval_s``.

``TopicManager`` is composed of parts, one job each. Two own their state:
``loaded.LoadedSegments`` (the table of loaded segments, their load locks and
the transaction buffers' snapshot store) and ``maintenance.TopicMaintenance``
(the background round: its task, hooks and rate meter). Two are mixins on
the fields of ``catalog.TopicsCore``: ``crud`` (create, get, list,
reconfigure, delete) and ``scale`` (scaling, sealing, successors).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Self

from broker.api import TopicConfig
from broker.segments.writers import DEFAULT_WRITER_EXPIRY_MS
from broker.topics.crud import MAX_SEGMENT_COUNT, TopicCrud
from broker.topics.maintenance import TopicMaintenance
from broker.topics.scale import TopicScaling
from ledger.api import LedgerService, MetadataStore
from txnbuffer.api import SnapshotPolicy, SnapshotStore

__all__ = ["MAX_SEGMENT_COUNT", "TopicManager"]


class TopicManager(TopicScaling, TopicCrud):
    """Topics and their segments on this broker (standalone: all of them).

    Args:
        ledgers: the ledger service.
        store: where topic and segment records live.
        defaults: the configuration of fields a topic's creator leaves unset.
        retention_interval_s: how often the background task applies retention,
            age rollover and writer expiry.
        clock: seconds since the epoch (injectable for tests).
        writer_expiry_ms: a segment forgets writers (their last event number)
            idle longer than this; default 7 days.
        txn_snapshots: when the segments' transaction buffers snapshot themselves.
        txn_store_factory: makes the transaction buffers' snapshot store on
            this manager, once, when the first user segment loads (the store is
            a system topic on this very manager, so the caller passes how to
            make it: ``broker.system.snapshot_store.snapshot_store``; this
            package never imports the system topics above it).
    """

    def __init__(
        self, ledgers: LedgerService, store: MetadataStore, *,
        txn_store_factory: Callable[[Self], SnapshotStore],
        defaults: TopicConfig | None = None, retention_interval_s: float = 60.0,
        clock: Callable[[], float] = time.time,
        writer_expiry_ms: int = DEFAULT_WRITER_EXPIRY_MS,
        txn_snapshots: SnapshotPolicy | None = None,
        reload_fenced: bool = False,
    ) -> None:
        super().__init__(
            ledgers, store,
            txn_store_factory=txn_store_factory,
            defaults=defaults, clock=clock, writer_expiry_ms=writer_expiry_ms,
            txn_snapshots=txn_snapshots, reload_fenced=reload_fenced)
        self._maintenance = TopicMaintenance(self, interval_s=retention_interval_s, clock=clock)

    async def start(self) -> None:
        """Start the background task (retention, rollover by age)."""
        if not self._closed:
            self._maintenance.start()

    async def close(self) -> None:
        """Stop background work and close every loaded segment's ledger cleanly."""
        self._closed = True
        await self._maintenance.stop()
        await super().close()

    def add_maintenance_hook(self, hook: Callable[[], Awaitable[object]]) -> None:
        """Run ``hook`` after every maintenance round (e.g. compaction of a system topic)."""
        self._maintenance.add_hook(hook)

    async def run_maintenance(self) -> None:
        """One round of background work on every loaded segment.

        Forgets idle writers, rolls ledgers over by age, applies retention,
        auto-scales, then runs the maintenance hooks.
        """
        await self._maintenance.run_round()
