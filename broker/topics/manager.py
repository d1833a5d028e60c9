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

``TopicManager`` holds parts, one job each, that own their state and get
their collaborators passed in; it owns only whether it is closed, and
delegates every call:

- ``loaded.LoadedSegments``: the table of loaded segments, their load locks
  and the transaction buffers' snapshot store;
- ``catalog.TopicCatalog``: the per-topic locks, reading and
  compare-and-setting topic records, describing topics and segments;
- ``crud.TopicCrud``: create, get, list, reconfigure, delete;
- ``scale.TopicScaling``: scaling, sealing, successors;
- ``maintenance.TopicMaintenance``: the background round (its task, hooks
  and rate meter).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Self

from broker.api import ScaleOutcome, SegmentRange, StoredWriter, TopicConfig, TopicInfo
from broker.errors import BrokerShuttingDownError
from broker.segments.segment import LedgerSegment
from broker.segments.writers import DEFAULT_WRITER_EXPIRY_MS
from broker.topics.catalog import TopicCatalog
from broker.topics.crud import MAX_SEGMENT_COUNT, TopicCrud
from broker.topics.loaded import LoadedSegments
from broker.topics.maintenance import TopicMaintenance
from broker.topics.records import TopicRecord
from broker.topics.scale import TopicScaling
from ledger.api import LedgerService, MetadataStore
from txnbuffer.api import SnapshotPolicy, SnapshotStore

__all__ = ["MAX_SEGMENT_COUNT", "TopicManager"]

#: The configuration a topic gets for the fields its creator leaves unset, the
#: same on every broker.
_DEFAULTS = TopicConfig()


class TopicManager:
    """Topics and their segments on this broker (standalone: all of them).

    Args:
        ledgers: the ledger service.
        store: where topic and segment records live.
        retention_interval_s: how often the background task applies retention,
            age rollover and writer expiry.
        clock: seconds since the epoch (injectable for tests).
        writer_expiry_ms: a segment forgets writers (their last event number)
            idle longer than this; default 7 days.
        txn_snapshots: when the segments' transaction buffers snapshot themselves.
        reload_fenced: a cluster broker's (``loaded.needs_reload``).
        leader_epoch_of: a cluster broker's: the leader epoch of its ownership
            of a segment, -1 if it does not own it (``loaded.LoadedSegments``).
        txn_store_factory: makes the transaction buffers' snapshot store on
            this manager, once, when the first user segment loads (the store is
            a system topic on this very manager, so the caller passes how to
            make it: ``broker.system.snapshot_store.snapshot_store``; this
            package never imports the system topics above it).
    """

    def __init__(
        self, ledgers: LedgerService, store: MetadataStore, *,
        txn_store_factory: Callable[[Self], SnapshotStore],
        retention_interval_s: float = 60.0,
        clock: Callable[[], float] = time.time,
        writer_expiry_ms: int = DEFAULT_WRITER_EXPIRY_MS,
        txn_snapshots: SnapshotPolicy | None = None,
        reload_fenced: bool = False,
        leader_epoch_of: Callable[[str], int] | None = None,
    ) -> None:
        if writer_expiry_ms <= 0:
            raise ValueError(f"writer_expiry_ms must be positive, got {writer_expiry_ms}")
        self._closed = False
        self._ledgers = ledgers
        self._loaded = LoadedSegments(
            ledgers, store, check_open=self._check_open, clock=clock,
            writer_expiry_ms=writer_expiry_ms,
            txn_snapshots=txn_snapshots or SnapshotPolicy(),
            make_txn_store=functools.partial(txn_store_factory, self),
            reload_fenced=reload_fenced, leader_epoch_of=leader_epoch_of)
        catalog = TopicCatalog(ledgers, store, self._loaded)
        self._catalog = catalog
        self._crud = TopicCrud(store, catalog, self._loaded, clock=clock,
                               check_open=self._check_open)
        self._scaling = TopicScaling(catalog, self._loaded, check_open=self._check_open)
        self._maintenance = TopicMaintenance(self, interval_s=retention_interval_s, clock=clock)

    async def start(self) -> None:
        """Start the background task (retention, rollover by age)."""
        if not self._closed:
            self._maintenance.start()

    async def close(self) -> None:
        """Refuse further calls, stop background work, close every loaded segment's ledger."""
        self._closed = True
        await self._maintenance.stop()
        await self._loaded.close()

    def _check_open(self) -> None:
        if self._closed:
            raise BrokerShuttingDownError("the broker is shutting down")

    # Maintenance (``maintenance.TopicMaintenance``).

    def add_maintenance_hook(self, hook: Callable[[], Awaitable[object]]) -> None:
        """Run ``hook`` after every maintenance round (e.g. compaction of a system topic)."""
        self._maintenance.add_hook(hook)

    def add_deletion_hook(self, hook: Callable[[str], Awaitable[object]]) -> None:
        """Call ``hook(name)`` after each topic deletion here (``TopicCrud.add_deletion_hook``)."""
        self._crud.add_deletion_hook(hook)

    async def run_maintenance(self) -> None:
        """One round of background work on every loaded segment.

        Forgets idle writers, rolls ledgers over by age, applies retention,
        auto-scales, then runs the maintenance hooks.
        """
        await self._maintenance.run_round()

    # Settings.

    @property
    def max_entry_bytes(self) -> int:
        """The ledger entry limit: one append (header and blocks) is at most this."""
        return self._ledgers.max_entry_bytes

    def default_config(self) -> TopicConfig:
        """The configuration a topic gets for the fields its creator leaves unset."""
        return _DEFAULTS

    # Loaded segments (``loaded.LoadedSegments``).

    def txn_snapshot_store(self) -> SnapshotStore:
        """The transaction buffers' snapshot store (``_txnbuffer_snapshots``), made once."""
        return self._loaded.txn_snapshot_store()

    async def segment(self, name: str) -> LedgerSegment:
        """The segment, loaded (and recovered) on first use. ``NoSuchSegmentError``.

        Its transaction buffer is recovered too (``LedgerSegment.recovered``).
        """
        return await self._loaded.segment(name)

    async def writable_segment(self, name: str, action: str) -> LedgerSegment:
        """``segment(name)`` for a public write (``action``: Append, Produce, TruncateSegment).

        ``InternalTopicError`` for a system topic's segment (``LoadedSegments``).
        """
        return await self._loaded.writable_segment(name, action)

    async def stored_writer(self, name: str, writer_id: str,
                            failed_ledger_id: int) -> StoredWriter:
        """A writer's state as segment ``name`` stores it, without loading it here."""
        return await self._loaded.stored_writer(name, writer_id, failed_ledger_id)

    async def release_segments(self, moving: Callable[[str], bool]) -> None:
        """Hand over every loaded segment whose name ``moving`` accepts, and forget it."""
        await self._loaded.release_segments(moving)

    def drop_segments(self, moving: Callable[[str], bool]) -> None:
        """Forget every loaded segment ``moving`` accepts, at once, touching no store."""
        self._loaded.drop_segments(moving)

    async def open_segment_names(self) -> list[str]:
        """The names of every open (unsealed) segment of the user topics, from their records."""
        return await self._loaded.open_segment_names()

    def loaded_segments(self) -> list[LedgerSegment]:
        """The segments loaded on this broker now (a copy; ``broker.metrics`` reads it)."""
        return self._loaded.loaded_segments()

    # Topic CRUD (``crud.TopicCrud``).

    async def create_topic(
        self, name: str, segment_count: int, config: TopicConfig, *, internal: bool = False,
    ) -> TopicInfo:
        """Create a topic of ``segment_count`` equal key ranges (``TopicCrud.create_topic``).

        ``internal`` allows a system topic name (``_`` prefix). Raises
        ``TopicNameError``, ``InternalTopicError``, ``InvalidArgumentError``,
        ``TopicExistsError``.
        """
        return await self._crud.create_topic(name, segment_count, config, internal=internal)

    async def get_topic(self, name: str) -> TopicInfo:
        """The topic with its active segments and their offsets. ``TopicNotFoundError``."""
        return await self._crud.get_topic(name)

    async def topic_id(self, name: str) -> str:
        """The topic's Kafka id; one of an earlier build is given one (``TopicCatalog``)."""
        self._check_open()
        return await self._catalog.topic_id(name)

    async def list_topics(self, *, include_internal: bool = False) -> list[TopicInfo]:
        """Every user topic by name; system topics too with ``include_internal``."""
        return await self._crud.list_topics(include_internal=include_internal)

    async def delete_topic(self, name: str, *, internal: bool = False) -> None:
        """Delete the topic, its segments and their ledgers (``TopicCrud.delete_topic``)."""
        await self._crud.delete_topic(name, internal=internal)

    async def update_topic_config(self, name: str, changes: Mapping[str, int], *,
                                  internal: bool = False) -> TopicInfo:
        """Set the named ``TopicConfig`` fields (``TopicCrud.update_topic_config``)."""
        return await self._crud.update_topic_config(name, changes, internal=internal)

    # Scaling (``scale.TopicScaling``).

    async def list_segments(self, topic: str, *, include_sealed: bool) -> list[SegmentRange]:
        """Open segments by ``key_low``, or (``include_sealed``) every segment by number."""
        return await self._scaling.list_segments(topic, include_sealed=include_sealed)

    async def scale_topic(self, topic: str, seal: Sequence[str],
                          new_ranges: Sequence[tuple[float, float]], *,
                          scaled_ms: int | None = None) -> ScaleOutcome:
        """Seal ``seal`` and create successors over ``new_ranges`` (``TopicScaling``)."""
        return await self._scaling.scale_topic(topic, seal, new_ranges, scaled_ms=scaled_ms)

    async def get_successors(self, segment: str) -> tuple[SegmentRange, list[SegmentRange]]:
        """The segment and its successors by ``key_low``. ``NoSuchSegmentError``."""
        return await self._scaling.get_successors(segment)

    async def seal_topic(self, topic: str) -> TopicInfo:
        """Seal every open segment, without successors (``TopicScaling.seal_topic``)."""
        return await self._scaling.seal_topic(topic)

    async def open_segment_ends(self, topic: str) -> tuple[TopicRecord, dict[int, int | None]]:
        """The topic's record and the end offsets of its open segments, by number."""
        return await self._scaling.open_segment_ends(topic)
