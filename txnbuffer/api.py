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
    """Kinds of segment entries (the values are those of ``broker.entry.EntryKind``)."""

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
