"""A segment's transactional side: txn ids, isolation, its ``SegmentLog`` for the buffer.

A segment of a user topic owns a ``txnbuffer.TransactionBuffer``. The segment
reports each entry to it once durable, in position order, and recovers it on
load by replaying its ledgers through ``LedgerSegmentLog`` (which also keeps
``TxnOffsets`` up to date, so the segment knows the *offset* where the
earliest open transaction begins: the end a ``read_committed`` reader waits at).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

from broker.api import Isolation
from broker.errors import InvalidArgumentError
from broker.segments.entry import EntryKind, decode_entry_header
from broker.segments.offset_index import LedgerSpan
from ledger.api import WriteHandle
from txnbuffer.api import EntryKind as LoggedKind
from txnbuffer.api import LoggedEntry, Position, TxnId
from txnbuffer.txn_ids import TXN_ID_BYTES, txn_id_from_bytes

__all__ = [
    "Isolation",
    "LedgerSegmentLog",
    "TxnOffsets",
    "check_txn_id",
]

_SCAN_ENTRIES = 256


def check_txn_id(raw: bytes) -> TxnId:
    """The ``TxnId`` that ``raw`` carries, if it is a valid one (16 bytes, not all zero).

    Raises:
        InvalidArgumentError: otherwise.
    """
    txn_id = txn_id_from_bytes(raw) if len(raw) == TXN_ID_BYTES else None
    if txn_id is None:
        raise InvalidArgumentError(
            f"a txn_id must be {TXN_ID_BYTES} bytes and not all zero, got {len(raw)} bytes")
    return txn_id


class TxnOffsets:
    """The first entry (position and offset) of each transaction not yet decided.

    Lets the segment turn the buffer's ``max_read_position`` into an offset.
    """

    def __init__(self) -> None:
        self._first: dict[TxnId, Position] = {}
        self._offsets: dict[Position, int] = {}

    def note(self, position: Position, kind: EntryKind | LoggedKind, txn_id: TxnId | None,
             base_offset: int) -> None:
        """Account for one durable entry (call before reporting it to the buffer)."""
        if txn_id is None:
            return
        if kind == EntryKind.TXN_DATA:
            if txn_id not in self._first:
                self._first[txn_id] = position
                self._offsets[position] = base_offset
        elif kind in (EntryKind.COMMIT_MARKER, EntryKind.ABORT_MARKER):
            first = self._first.pop(txn_id, None)
            if first is not None:
                self._offsets.pop(first, None)

    def offset_at(self, position: Position) -> int | None:
        """The base offset of the first entry of a transaction beginning at ``position``."""
        return self._offsets.get(position)


class LedgerSegmentLog:
    """``txnbuffer.api.SegmentLog`` over a segment's ledgers (read at recovery).

    Args:
        spans: the segment's ledgers, in order.
        reader: opens a span for reading (the segment's ``_reader``).
        offsets: updated with every entry yielded.
    """

    def __init__(self, spans: Sequence[LedgerSpan],
                 reader: Callable[[LedgerSpan], Awaitable[WriteHandle]],
                 offsets: TxnOffsets) -> None:
        self._spans = list(spans)
        self._reader = reader
        self._offsets = offsets
        #: The position of the last entry yielded (and noted), None before the first.
        self.last_position: Position | None = None

    async def entries_after(self, position: Position | None) -> AsyncIterator[LoggedEntry]:
        """Every entry after ``position`` (``(L, -1)`` and ``EARLIEST`` allowed), in order."""
        for span in self._spans:
            start = 0
            if position is not None:
                if span.ledger_id < position.ledger_id:
                    continue
                if span.ledger_id == position.ledger_id:
                    start = position.entry_id + 1
            handle = await self._reader(span)
            last = span.last_entry_id if span.writing else handle.last_add_confirmed
            entry_id = start
            while entry_id <= last:
                high = min(entry_id + _SCAN_ENTRIES - 1, last)
                for data in await handle.read(entry_id, high):
                    header = decode_entry_header(data)
                    here = Position(span.ledger_id, entry_id)
                    self._offsets.note(here, header.kind, header.txn_id, header.base_offset)
                    self.last_position = here
                    yield LoggedEntry(here, LoggedKind(header.kind), header.txn_id)
                    entry_id += 1
