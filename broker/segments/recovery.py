"""Recovering a segment's ledger chain when a broker loads the segment.

The segment record lists the chain; only its tail needs work. The last ledger
is opened with recovery, which fences it (a previous owner, crashed or
alive, can append nothing more) and closes it at the end its bookies agree
on. Its entry headers are then scanned: the last one gives the segment's end
offset (base + count), all of them the ledger's offset index. Empty ledgers at
the tail (a restart that appended nothing) are set aside to be replaced, and
the scan moves to the ledger before. Ledgers other than the last are not
touched here; they are opened (with recovery too, which closes one a crashed
rollover left open) when read.

**Writers.** The record's writer snapshot covers every entry before ledger
``writers_ledger``, which is always the record's last ledger (every record
write that adds a ledger writes a fresh snapshot for it). So the writers'
state is the snapshot, updated by the headers of that ledger if it has
entries; if it was empty (set aside above), the snapshot alone. A format 1
record has no snapshot: the headers of the newest non-empty ledger only.
A writer's recent appends (``broker.segments.writers``) are those of the
snapshot followed by those of the headers, the last ``RECENT_APPENDS`` of
them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from broker.api import StoredWriter
from broker.errors import NoSuchSegmentError
from broker.segments.names import make_segment_name, segment_path
from broker.segments.offset_index import LedgerSpan
from broker.segments.reads import scan_ledger
from broker.segments.records import RECENT_APPENDS, SegmentRecord, WriterState
from ledger.api import LedgerService, MetadataStore
from ledger.errors import NoNodeError

__all__ = ["RecoveredChain", "recover_chain", "stored_writer"]


@dataclass(slots=True)
class RecoveredChain:
    """A segment's chain after recovery.

    Attributes:
        record: the segment record as read.
        version: its version, for the next compare-and-set.
        spans: the ledgers to keep, all closed, the last one scanned.
        empty: empty ledgers from the tail, to drop from the chain.
        end_offset: the offset the next event gets.
        writers: each writer's state: the record's snapshot updated by the
            headers of its ledger (see the module docstring).
    """

    record: SegmentRecord
    version: int
    spans: list[LedgerSpan]
    end_offset: int
    empty: list[LedgerSpan] = field(default_factory=list)
    writers: dict[str, WriterState] = field(default_factory=dict)


async def recover_chain(
    ledgers: LedgerService, store: MetadataStore, topic: str, number: int,
) -> RecoveredChain:
    """Read the segment record and recover its tail (see the module docstring).

    Raises ``NoSuchSegmentError`` without a record, ``LedgerError`` if the
    ledger service fails, ``CorruptDataError`` for entries that do not chain.
    """
    try:
        node = await store.get(segment_path(topic, number))
    except NoNodeError:
        raise NoSuchSegmentError(make_segment_name(topic, number)) from None
    record = SegmentRecord.from_bytes(node.data)
    chain = RecoveredChain(record, node.version,
                           [LedgerSpan.from_record(ledger) for ledger in record.ledgers],
                           record.start_offset)
    spans = chain.spans
    chain.writers = dict(record.writers)
    while spans:
        last = spans[-1]
        handle = await ledgers.open(last.ledger_id, recovery=True)
        scan = await scan_ledger(handle, last.first_offset)
        last.handle = handle
        last.bases = scan.bases
        last.indexed_end = scan.end_offset
        last.length_bytes = handle.length
        last.last_entry_ms = scan.last_entry_ms
        chain.end_offset = scan.end_offset
        if handle.last_add_confirmed >= 0 or record.sealed:
            # Unless the snapshot was taken at the start of an empty ledger
            # after this one: then it already covers this ledger.
            if all(span.ledger_id != record.writers_ledger for span in chain.empty):
                _apply(chain.writers, scan.writers)
            break
        chain.empty.append(spans.pop())
    if record.sealed:
        chain.end_offset = record.end_offset
    return chain


def _apply(writers: dict[str, WriterState], scanned: dict[str, WriterState]) -> None:
    """Update the snapshot's ``writers`` by the states a ledger's headers gave."""
    for writer_id, state in scanned.items():
        before = writers.get(writer_id)
        if before is None:
            writers[writer_id] = state
            continue
        # The snapshot covers entries before the scanned ledger: its appends
        # come first (any at or after the scan's first are left out rather
        # than counted twice).
        first = state.recent[0][2] if state.recent else None
        older = tuple(append for append in before.recent
                      if first is None or append[2] < first)
        writers[writer_id] = WriterState(state.last_event_number, state.last_update_ms,
                                         (*older, *state.recent)[-RECENT_APPENDS:])


async def stored_writer(
    ledgers: LedgerService, store: MetadataStore, topic: str, number: int, writer_id: str,
    failed_ledger_id: int,
) -> StoredWriter:
    """A writer's state as the segment stores it, read without loading the segment.

    For a broker that cannot load the segment (another broker owns it now, or
    writes are paused) and must know whether an append it handed to ledger
    ``failed_ledger_id`` before that ledger failed or was fenced is stored
    (``broker.kafka.sequences``). What a load would recover, read only: the
    record's writer snapshot, updated by the headers of the record's last
    ledger (the snapshot covers every ledger before it, the failed one too
    when the chain has moved past it). Fences nothing: while the failed
    ledger is still the record's last and not closed (nobody has loaded the
    segment since), what it holds is not decided (``decided`` False); the next
    load, here or at the new owner, closes it, and the caller asks again.

    Raises ``NoSuchSegmentError`` without a record, ``LedgerError`` if the
    metadata store or the bookies fail.
    """
    try:
        node = await store.get(segment_path(topic, number))
    except NoNodeError:
        raise NoSuchSegmentError(make_segment_name(topic, number)) from None
    record = SegmentRecord.from_bytes(node.data)
    writers = dict(record.writers)
    if record.ledgers:
        last = LedgerSpan.from_record(record.ledgers[-1])
        # Closed: read to its end; another broker's open ledger: to its last
        # add confirmed (an earlier copy of the append is confirmed long since).
        handle = await ledgers.open(last.ledger_id, recovery=False)
        if last.ledger_id == failed_ledger_id and not handle.is_closed:
            return StoredWriter(decided=False)
        scan = await scan_ledger(handle, last.first_offset)
        if record.writers_ledger in (last.ledger_id, -1):
            _apply(writers, scan.writers)
    state = writers.get(writer_id)
    if state is None:
        return StoredWriter(decided=True)
    return StoredWriter(True, state.last_event_number, state.recent)
