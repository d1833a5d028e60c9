"""The transaction buffer's contracts: positions, entries it replays, where snapshots go.

``txnbuffer`` sits between ``ledger`` and ``broker``: it knows ledger positions
and the kinds of segment entries, never gRPC or the broker's classes. The
broker gives it a ``SnapshotStore`` (the compacted system topic
``_txnbuffer_snapshots``) and a ``SegmentLog`` (the segment's entries).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import Final, NamedTuple, Protocol

__all__ = [
    "EARLIEST",
    "EntryKind",
    "LoggedEntry",
    "Position",
    "SegmentLog",
    "SnapshotPolicy",
    "SnapshotStore",
    "TxnId",
]


class Position(NamedTuple):
    """Where an entry is: ``(ledger_id, entry_id)``, ordered as the segment's entries are."""

    ledger_id: int
    entry_id: int


#: Before every entry of every segment: ``max_read_position`` of a segment with no
#: readable entry. Positions may also name "just before the first entry of ledger L"
#: as ``Position(L, -1)``; ``entries_after`` must accept such positions.
EARLIEST: Final = Position(-1, -1)


#: A transaction id: 128 bits, as Pulsar's TxnID (most, least significant 64 bits).
TxnId = tuple[int, int]


class EntryKind(IntEnum):
    """Kinds of segment entries, as each entry header carries them (``broker.segments.entry``)."""

    DATA = 1
    TXN_DATA = 2
    COMMIT_MARKER = 3
    ABORT_MARKER = 4


@dataclass(frozen=True, slots=True)
class LoggedEntry:
    """What recovery needs of one segment entry: where it is, its kind, its transaction."""

    position: Position
    kind: EntryKind
    txn_id: TxnId | None


@dataclass(frozen=True, slots=True)
class SnapshotPolicy:
    """When a transaction buffer snapshots itself, and in what chunks.

    Attributes:
        every_changes: after this many changes (an abort recorded,
            ``max_read_position`` moved) ...
        every_ms: ... or when this long has passed since the last snapshot
            and anything changed.
        chunk_bytes: the largest snapshot record; 0 means the store's
            ``max_record_bytes`` (tests set it small to force many chunks).
    """

    every_changes: int = 1000
    every_ms: int = 60_000
    chunk_bytes: int = 0

    def __post_init__(self) -> None:
        if self.every_changes < 1 or self.every_ms < 1 or self.chunk_bytes < 0:
            raise ValueError("snapshot every_changes and every_ms must be positive and "
                             f"chunk_bytes >= 0, got {self.every_changes}, {self.every_ms}, "
                             f"{self.chunk_bytes}")


class SegmentLog(Protocol):
    """A segment's entries, as the buffer replays them after loading a snapshot."""

    def entries_after(self, position: Position | None) -> AsyncIterator[LoggedEntry]:
        """Every entry after ``position`` (all of them for None), in order, to the end."""


class SnapshotStore(Protocol):
    """A compacted key-value topic: the latest record per key survives.

    Writes are durable when they return; a record never exceeds
    ``max_record_bytes`` (the ledger entry limit, less framing).
    """

    @property
    def max_record_bytes(self) -> int:
        """The largest value ``write`` accepts."""

    async def write(self, key: str, value: bytes | None) -> None:
        """Write ``value`` under ``key``; None writes a tombstone (the key is deleted)."""

    async def read_prefix(self, prefix: str) -> Mapping[str, bytes]:
        """The latest value of every live key starting with ``prefix``."""
