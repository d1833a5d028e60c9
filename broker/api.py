"""The broker's domain contracts: topics and segments, as the gRPC services see them.

The servicers in ``broker/services/`` are thin: they decode a message, call
one method here and encode the result (or map the raised ``BrokerError`` /
``LedgerError`` through ``broker/status.py``). Everything below is async and
runs on the broker's one event loop.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum, IntEnum
from typing import Protocol, runtime_checkable

from txnbuffer.api import TxnId

__all__ = [
    "AppendResult",
    "Block",
    "LeaderEpochs",
    "ReadBlock",
    "ScaleOutcome",
    "SegmentHandle",
    "SegmentInfo",
    "SegmentLedger",
    "SegmentRange",
    "SegmentState",
    "TopicConfig",
    "TopicInfo",
    "Topics",
    "WriterStates",
]

MIB = 1024 * 1024


class SegmentState(Enum):
    """A segment takes appends while OPEN; SEALED is final (still readable)."""

    OPEN = "open"
    SEALED = "sealed"


@dataclass(frozen=True, slots=True)
class TopicConfig:
    """A topic's configuration (the proto's ``TopicConfig``, every value set).

    Checked in ``__post_init__``; ``ValueError`` names the bad field. -1 means
    "no limit" for the two retention values.
    """

    retention_ms: int = -1
    retention_bytes: int = -1
    max_event_bytes: int = MIB
    ledger_rollover_bytes: int = 64 * MIB
    ledger_rollover_ms: int = 4 * 3600 * 1000
    #: Auto-scaling: events/s one segment should take; 0 turns it off.
    scale_target_events_per_s: int = 0
    #: Auto-scaling never merges below this many open segments.
    scale_min_segments: int = 1
    #: Auto-scaling changes a topic at most once per this many ms.
    scale_cooldown_ms: int = 60_000

    def __post_init__(self) -> None:
        if self.retention_ms < -1 or self.retention_ms == 0:
            raise ValueError(f"retention_ms must be -1 (forever) or > 0, got {self.retention_ms}")
        if self.retention_bytes < -1 or self.retention_bytes == 0:
            raise ValueError(
                f"retention_bytes must be -1 (no limit) or > 0, got {self.retention_bytes}")
        if not 1 <= self.max_event_bytes <= 4 * MIB:
            raise ValueError(
                f"max_event_bytes must be in [1, {4 * MIB}], got {self.max_event_bytes}")
        if self.ledger_rollover_bytes < 1024:
            raise ValueError(
                f"ledger_rollover_bytes must be >= 1024, got {self.ledger_rollover_bytes}")
        if self.ledger_rollover_ms < 1000:
            raise ValueError(f"ledger_rollover_ms must be >= 1000, got {self.ledger_rollover_ms}")
        if self.scale_target_events_per_s < 0:
            raise ValueError("scale_target_events_per_s must be >= 0 (0: no auto-scaling), "
                             f"got {self.scale_target_events_per_s}")
        if not 1 <= self.scale_min_segments <= 1024:
            raise ValueError(
                f"scale_min_segments must be in [1, 1024], got {self.scale_min_segments}")
        if self.scale_cooldown_ms < 0:
            raise ValueError(f"scale_cooldown_ms must be >= 0, got {self.scale_cooldown_ms}")


@dataclass(frozen=True, slots=True)
class SegmentRange:
    """A segment and the key range ``[key_low, key_high)`` it owns.

    ``predecessors`` / ``successors``: segment names across scaling (filled
    where the topic record is at hand: topic, segment lists, scaling calls).
    """

    name: str
    number: int
    key_low: float
    key_high: float
    state: SegmentState
    start_offset: int = 0
    end_offset: int = 0
    predecessors: tuple[str, ...] = ()
    successors: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """A topic: name, configuration, active segments (by ``key_low``), creation time.

    ``sealed``: SealTopic sealed it (it has no open segment). ``topic_id``:
    its Kafka topic id, a UUID in canonical text form, stable for the topic's
    life ("" where no broker record backs the value).
    """

    name: str
    config: TopicConfig
    segments: tuple[SegmentRange, ...]
    created_ms: int
    sealed: bool = False
    topic_id: str = ""


@dataclass(frozen=True, slots=True)
class ScaleOutcome:
    """What ScaleTopic did: the segments sealed and those created, each by ``key_low``."""

    sealed: tuple[SegmentRange, ...]
    created: tuple[SegmentRange, ...]


@dataclass(frozen=True, slots=True)
class SegmentLedger:
    """One ledger of a segment's chain and the offset of its first event.

    The API value (proto ``SegmentLedger``, SDK ``folio.SegmentLedger``), built
    from the broker's ``LedgerSpan``; the segment record stores a ``LedgerRecord``.
    """

    ledger_id: int
    first_offset: int
    closed: bool


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    """A segment's offsets, state, ledger chain (oldest first) and size in bytes."""

    segment: SegmentRange
    ledgers: tuple[SegmentLedger, ...]
    length_bytes: int

    @property
    def sealed(self) -> bool:
        """Whether the segment is sealed."""
        return self.segment.state is SegmentState.SEALED


@dataclass(frozen=True, slots=True)
class Block:
    """One block to append: the bytes as the client packed them and their event count."""

    data: bytes
    event_count: int


@dataclass(frozen=True, slots=True)
class ReadBlock:
    """One block read back: the offset of its first event, its event count, its bytes."""

    offset: int
    event_count: int
    data: bytes


@dataclass(frozen=True, slots=True)
class AppendResult:
    """What an append did: the first offset written.

    For a duplicate: the offset its first copy got, -1 if no longer remembered.
    """

    offset: int
    event_count: int
    event_number: int
    duplicate: bool = False


@dataclass(frozen=True, slots=True)
class StoredWriter:
    """A writer's state as a segment stores it (``Topics.stored_writer``).

    Attributes:
        decided: False while the ledger asked about is open: what it holds is
            not decided yet (the next load of the segment closes it).
        last_event_number: the writer's last stored number (-1: none).
        recent: its last appends, oldest first, each (first event number, last
            event number, base offset) (``broker.segments.records.WriterState``).
    """

    decided: bool
    last_event_number: int = -1
    recent: tuple[tuple[int, int, int], ...] = ()


class Isolation(IntEnum):
    """What a reader is served (values as ``folio.v1.ReadRequest.Isolation``)."""

    #: Data up to the transaction buffer's max_read_position, without aborted
    #: transactions' entries; never markers. The default.
    READ_COMMITTED = 0
    #: Every data entry (plain and transactional); never markers.
    READ_UNCOMMITTED = 1


@dataclass(slots=True)
class ReadBatch:
    """One read: blocks in offset order, the end offset then, and whether that is the end."""

    blocks: list[ReadBlock] = field(default_factory=list)
    end_offset: int = 0
    end_of_segment: bool = False
    #: Where the next read continues (after the last entry read, served or left
    #: out); -1 when unknown: after the last block.
    next_offset: int = field(default=-1, compare=False)


class SegmentHandle(Protocol):
    """One segment, loaded (recovered) and owned by this broker."""

    @property
    def name(self) -> str:
        """``"<topic>/<number>"``."""

    @property
    def config(self) -> TopicConfig:
        """The topic configuration in force (``max_event_bytes`` for appends)."""

    async def last_event_number(self, writer_id: str) -> int:
        """The last event number recorded for ``writer_id``, -1 if none."""

    async def append(
        self, blocks: Sequence[Block], writer_id: str, last_event_number: int, *,
        txn_id: TxnId | None = None, contiguous: bool = False,
    ) -> AppendResult:
        """Append ``blocks`` as ONE ledger entry, atomically, once durable.

        With ``txn_id`` the entry belongs to that transaction. ``contiguous``:
        the writer's numbers have no gaps (Kafka sequences), so a call that
        skips numbers is refused (``InvalidEventNumberError``).

        Constant work per block: the blocks are not parsed (the Append
        service checks a client's blocks first: ``broker.segments.block_limits``). Appends are
        confirmed in the order they were called (concurrent calls are
        group-committed by the ledger). Events are numbered consecutively (the
        first is ``last_event_number - (events - 1)``); a call whose
        ``last_event_number`` is not above the writer's recorded one returns a
        duplicate result and writes nothing; its offset is the first copy's
        if it is one of the writer's last appends, else -1.

        Raises:
            SegmentSealedError: the segment is sealed.
            EventTooLargeError: a block above ``block_limits.MAX_BLOCK_BYTES``,
                or the entry above the ledger entry limit.
            InvalidEventNumberError: ``last_event_number`` < -1, no events, or
                numbers overlapping the writer's recorded one.
            NoSuchSegmentError: the segment was deleted.
            LedgerError: the ledger service failed (its ``retriable`` says).
        """

    async def read(self, offset: int, max_bytes: int,
                   isolation: Isolation = Isolation.READ_COMMITTED) -> ReadBatch:
        """The blocks from the one holding ``offset`` on, about ``max_bytes`` of them.

        ``isolation``: what is served (``Isolation``). Returns at once (an empty batch at
        the tail). Raises ``OffsetOutOfRangeError`` for an offset outside
        ``[start, end]``.
        """

    @property
    def committed_end(self) -> int:
        """The offset ``READ_COMMITTED`` readers are served up to (Kafka's last stable offset)."""

    async def wait_for_data(self, offset: int, timeout_s: float,
                            isolation: Isolation = Isolation.READ_COMMITTED) -> bool:
        """Wait until an event at ``offset`` exists (for ``isolation``) or the segment is sealed.

        Returns False after ``timeout_s`` without either. Never polls.
        """

    def info(self) -> SegmentInfo:
        """Offsets, state and ledgers now."""

    async def truncate(self, offset: int) -> SegmentInfo:
        """Delete the ledgers wholly before ``offset`` (see Admin.TruncateSegment)."""


@runtime_checkable
class WriterStates(Protocol):
    """A segment that can list the writers it remembers (Kafka's DescribeProducers).

    Apart from ``SegmentHandle`` so that handles without it (test doubles) stay handles.
    """

    def writer_states(self) -> dict[str, tuple[int, int]]:
        """Each writer id the segment remembers: (last event number, last append time in ms)."""


@runtime_checkable
class LeaderEpochs(Protocol):
    """A segment that keeps its leader-epoch history (Kafka's OffsetForLeaderEpoch).

    Apart from ``SegmentHandle`` so that handles without it (test doubles) stay handles.
    """

    def leader_epochs(self) -> tuple[tuple[int, int], ...]:
        """(leader epoch, offset of its first event), oldest first.

        ``broker.segments.epoch_history`` says how it is kept.
        """


class Topics(Protocol):
    """Topics and their segments on this broker (standalone: all of them).

    Every call that writes, reconfigures, scales, seals, deletes or creates a
    system topic (a ``_`` name) raises ``InternalTopicError``
    (``broker.topics.internal``); the broker's own components reach those
    through ``segment`` alone.
    """

    async def create_topic(
        self, name: str, segment_count: int, config: TopicConfig
    ) -> TopicInfo:
        """Create a topic with equal key ranges. TopicNameError, TopicExistsError."""

    async def get_topic(self, name: str) -> TopicInfo:
        """The topic. TopicNotFoundError."""

    async def list_topics(self, *, include_internal: bool = False) -> list[TopicInfo]:
        """Every user topic, by name; the system topics too with ``include_internal``."""

    async def topic_id(self, name: str) -> str:
        """The topic's Kafka id (``TopicInfo.topic_id``) from its record. TopicNotFoundError."""

    async def delete_topic(self, name: str) -> None:
        """Delete the topic, its segments and their ledgers. TopicNotFoundError."""

    async def update_topic_config(self, name: str, changes: Mapping[str, int]) -> TopicInfo:
        """Set the named ``TopicConfig`` fields. TopicNotFoundError, InvalidArgumentError."""

    async def segment(self, name: str) -> SegmentHandle:
        """The segment, loaded (and recovered) on first use. NoSuchSegmentError."""

    async def writable_segment(self, name: str, action: str) -> SegmentHandle:
        """``segment`` for a public write named ``action``; InternalTopicError for a system one."""

    async def stored_writer(self, name: str, writer_id: str,
                            failed_ledger_id: int) -> StoredWriter:
        """A writer's state as the segment stores it, read without loading or owning it.

        For an append handed to ledger ``failed_ledger_id`` before that ledger
        failed or was fenced (``broker.segments.recovery.stored_writer``):
        ``decided`` is False while that ledger is open and still the last.
        NoSuchSegmentError; LedgerError if storage fails.
        """

    def default_config(self) -> TopicConfig:
        """The configuration a topic gets for the fields its creator leaves unset."""

    async def list_segments(self, topic: str, *, include_sealed: bool) -> list[SegmentRange]:
        """Open segments by ``key_low``, or (``include_sealed``) every one by number."""

    async def scale_topic(self, topic: str, seal: Sequence[str],
                          new_ranges: Sequence[tuple[float, float]]) -> ScaleOutcome:
        """Seal ``seal`` and create successors covering exactly their ranges (atomic).

        InvalidArgumentError, NoSuchSegmentError, SegmentSealedError, TopicNotFoundError.
        """

    async def get_successors(self, segment: str) -> tuple[SegmentRange, list[SegmentRange]]:
        """The segment and its successors (by ``key_low``). NoSuchSegmentError."""

    async def seal_topic(self, topic: str) -> TopicInfo:
        """Seal every open segment, without successors. Idempotent. TopicNotFoundError."""

    async def close(self) -> None:
        """Stop background work and close every open ledger cleanly."""
