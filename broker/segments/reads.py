"""Reading a segment's ledgers: find the entry holding an offset, turn entries into blocks.

Constant Python work per entry and per block: an entry's header is unpacked
with ``struct`` and its frames sliced; events are never looked at.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from broker.api import ReadBlock
from broker.errors import CorruptDataError
from broker.segments.entry import EntryKind, decode_entry_header, split_frames
from broker.segments.offset_index import LedgerSpan, ReadHints
from broker.segments.records import RECENT_APPENDS, SegmentRecord, WriterState
from ledger.errors import BookieUnavailableError, NoSuchLedgerError
from txnbuffer.api import Position
from txnbuffer.buffer import TransactionBuffer

if TYPE_CHECKING:
    from ledger.api import LedgerService, ReadHandle

__all__ = ["LedgerScan", "find_entry", "peek_end_offset", "read_blocks", "scan_ledger"]


#: Most entries asked of the ledger in one read.
MAX_ENTRIES_PER_READ = 512
_SCAN_ENTRIES = 256


async def find_entry(
    span: LedgerSpan, handle: ReadHandle, offset: int, last_entry_id: int, hints: ReadHints,
) -> int:
    """The id of the entry of ``span`` that holds ``offset`` (``offset`` is in the span).

    The index answers if it covers ``offset``, then the read hints; otherwise a
    binary search reads O(log entries) entry headers.
    """
    if offset == span.first_offset:
        return 0
    entry_id = span.lookup(offset)
    if entry_id is None:
        entry_id = hints.get(offset, span.ledger_id)
    if entry_id is not None:
        return entry_id
    # Invariant: the entry at ``low`` begins at or before ``offset``. The index
    # holds entries 0 .. len(bases) - 1, all of which begin before ``offset``.
    low, high = max(len(span.bases) - 1, 0), last_entry_id
    while low < high:
        middle = (low + high + 1) // 2
        header = decode_entry_header((await handle.read(middle, middle))[0])
        if header.base_offset <= offset:
            low = middle
        else:
            high = middle - 1
    return low


async def read_blocks(
    span: LedgerSpan, handle: ReadHandle, entry_id: int, last_entry_id: int,
    offset: int, max_bytes: int, committed: TransactionBuffer | None = None,
) -> tuple[list[ReadBlock], int, int]:
    """Blocks from entry ``entry_id`` (which holds ``offset``) on, about ``max_bytes``.

    Reads at least one entry and never past ``last_entry_id``; blocks of the
    first entry that end at or before ``offset`` are left out. Markers hold no
    blocks. With ``committed`` (a ``read_committed`` read) the read stops
    before the first entry above its ``max_read_position`` and leaves out
    entries it says are not visible (aborted transactions'); one check per
    entry. Returns the blocks, the next entry id and the offset it begins at.
    """
    entries = last_entry_id + 1
    average = max(span.confirmed_length() // entries, 1) if entries > 0 else 1
    count = min(max(max_bytes // average, 1), MAX_ENTRIES_PER_READ)
    last = min(entry_id + count - 1, last_entry_id)
    datas = await handle.read(entry_id, last)
    blocks: list[ReadBlock] = []
    total = 0
    next_offset = offset
    next_entry = entry_id
    limit = committed.max_read_position if committed is not None else None
    ledger_id = span.ledger_id
    for data in datas:
        header = decode_entry_header(data)
        if next_entry == entry_id:
            # A marker (no events) may begin exactly at ``offset``.
            if not (header.base_offset <= offset < header.end_offset
                    or (header.event_count == 0 and header.base_offset == offset)):
                raise CorruptDataError(
                    f"entry {entry_id} of ledger {span.ledger_id} holds offsets "
                    f"[{header.base_offset}, {header.end_offset}), expected {offset}")
        elif header.base_offset != next_offset:
            raise CorruptDataError(
                f"entry {next_entry} of ledger {span.ledger_id} begins at offset "
                f"{header.base_offset}, expected {next_offset}")
        span.note_entry(next_entry, header.base_offset, header.end_offset)
        kind = header.kind
        serve = kind is EntryKind.DATA or kind is EntryKind.TXN_DATA
        if committed is not None and limit is not None:
            position = Position(ledger_id, next_entry)
            if position > limit:
                break
            if kind is EntryKind.TXN_DATA:
                serve = committed.visible(position, EntryKind.TXN_DATA, header.txn_id)
        if serve:
            frames = split_frames(data, header)
            if header.base_offset < offset:
                frames = [block for block in frames
                          if block.offset + block.event_count > offset]
            blocks.extend(frames)
        next_offset = header.end_offset
        next_entry += 1
        total += len(data)
        if total >= max_bytes:
            break
    return blocks, next_entry, next_offset


@dataclass(slots=True)
class LedgerScan:
    """What reading every entry header of a ledger taught.

    Attributes:
        bases: the base offset of each entry.
        end_offset: the offset after the last event (the first offset if empty).
        last_entry_ms: the newest entry's time (-1 if empty).
        writers: each writer's state after its last entry in the ledger, with
            its appends in the ledger (the last ``RECENT_APPENDS``) as recent.
    """

    bases: array[int]
    end_offset: int
    last_entry_ms: int = -1
    writers: dict[str, WriterState] = field(default_factory=dict)


async def scan_ledger(handle: ReadHandle, first_offset: int) -> LedgerScan:
    """Read every entry header of a closed ledger (recovery of a segment's last ledger)."""
    scan = LedgerScan(array("q"), first_offset)
    last_entry_id = handle.last_add_confirmed
    writers = scan.writers
    entry_id = 0
    while entry_id <= last_entry_id:
        last = min(entry_id + _SCAN_ENTRIES - 1, last_entry_id)
        for data in await handle.read(entry_id, last):
            header = decode_entry_header(data)
            if header.base_offset != scan.end_offset:
                raise CorruptDataError(
                    f"entry {entry_id} of ledger {handle.ledger_id} begins at offset "
                    f"{header.base_offset}, expected {scan.end_offset}")
            scan.bases.append(header.base_offset)
            scan.end_offset = header.end_offset
            scan.last_entry_ms = header.time_ms
            if header.last_event_number >= 0:
                # Numbers of one writer only grow (the segment refuses the
                # rest), so its last entry is its state; its last few entries
                # are its recent appends.
                number = header.last_event_number
                before = writers.get(header.writer_id)
                recent = () if before is None else before.recent
                if header.event_count > 0:
                    recent = (*recent, (number - header.event_count + 1, number,
                                        header.base_offset))[-RECENT_APPENDS:]
                writers[header.writer_id] = WriterState(number, header.time_ms, recent)
            entry_id += 1
    return scan


async def peek_end_offset(ledgers: LedgerService, record: SegmentRecord) -> int:
    """The end offset of a segment this broker has not loaded, without fencing anything.

    A closed last ledger gives the exact end. For one still open (its writer
    crashed, or writes elsewhere) the LAC the bookies know lags the last
    entry, so this asks them for the last entry they hold and reads its header:
    exact once the writer is gone, possibly ahead of what a writer has
    confirmed while it still writes.
    """
    if record.sealed:
        return record.end_offset
    if not record.ledgers:
        return record.start_offset
    last = record.ledgers[-1]
    try:
        entry = await ledgers.peek_last_entry(last.ledger_id)
    except (NoSuchLedgerError, BookieUnavailableError):
        return last.first_offset
    if entry is None:
        return last.first_offset
    return decode_entry_header(entry).end_offset
