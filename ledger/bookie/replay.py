"""Reading the journal back: its records from a position, and replaying them into RocksDB.

``read_records`` yields the complete records of one file from an offset and
stops at the first that is not: a zero length (the preallocated rest of the
file), a record running past the end, or a checksum that does not match (a
write torn by a crash). Nothing after a torn record in the same file was
acknowledged: the writer syncs records in order and a failed write moves it
to a new file.

``replay`` applies every record after the checkpoint to the ledger states and
to RocksDB (without its WAL), file by file, then flushes RocksDB. Records are
idempotent (a put of the same value, LAC and last entry as maxima, a fence, a
delete), so a replay cut short by a crash is simply run again: the
checkpoint moves only after the flush (``ledger.bookie.checkpoint``).
"""

from __future__ import annotations

import logging
import mmap
import os
import struct
import sys
from array import array
from collections.abc import Iterator
from typing import Final

from crc32c import crc32c
from rocksdict import Rdict, WriteBatch, WriteOptions

from ledger.bookie.journal import ADD, DELETE, FENCE, HEADER, Position, file_name, journal_files
from ledger.bookie.ops import (
    LENGTH,
    LedgerState,
    delete_ledger,
    entry_key_prefix,
    pack_state,
    state_key,
)
from ledger.errors import StorageError

__all__ = ["apply_record", "read_records", "replay"]

log = logging.getLogger(__name__)

_ADD_HEAD: Final = struct.Struct("<qqI")
_LEDGER: Final = struct.Struct("<q")
_SWAP: Final = sys.byteorder != "little"


def read_records(path: str, offset: int = 0) -> Iterator[tuple[int, bytes]]:
    """The complete records of one journal file from ``offset``: (end offset, payload)."""
    with open(path, "rb") as file:
        size = os.fstat(file.fileno()).st_size
        if size <= offset:
            return
        with mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as view:
            while offset + HEADER.size <= size:
                length, checksum = HEADER.unpack_from(view, offset)
                start = offset + HEADER.size
                if length == 0 or start + length > size:
                    return
                payload = view[start:start + length]
                if crc32c(payload) != checksum:
                    log.warning("journal %s: torn record at offset %d dropped", path, offset)
                    return
                offset = start + length
                yield offset, payload


def _ints(typecode: str, payload: bytes, start: int, count: int) -> array[int]:
    values = array(typecode)
    values.frombytes(payload[start:start + count * values.itemsize])
    if _SWAP:
        values.byteswap()
    return values


def apply_record(payload: bytes, states: dict[int, LedgerState], write: WriteBatch,
                 dirty: set[int]) -> None:
    """Apply one journal record to the states and to a RocksDB write batch."""
    kind = payload[:1]
    if kind == ADD:
        ledger_id, lac, count = _ADD_HEAD.unpack_from(payload, 1)
        at = 1 + _ADD_HEAD.size
        entry_ids = _ints("q", payload, at, count)
        lengths = _ints("q", payload, at + 8 * count, count)
        sizes = _ints("I", payload, at + 16 * count, count)
        at += 20 * count
        prefix = entry_key_prefix(ledger_id)
        for entry_id, length, size in zip(entry_ids, lengths, sizes, strict=True):
            write.put(prefix + entry_id.to_bytes(8, "big"),
                      LENGTH.pack(length) + payload[at:at + size])
            at += size
        state = states.get(ledger_id)
        if state is None:
            state = states[ledger_id] = LedgerState()
        if count:
            state.last_entry_id = max(state.last_entry_id, entry_ids[-1])
        state.last_add_confirmed = max(state.last_add_confirmed, lac)
        dirty.add(ledger_id)
    elif kind == FENCE:
        (ledger_id,) = _LEDGER.unpack_from(payload, 1)
        state = states.get(ledger_id)
        if state is None:
            state = states[ledger_id] = LedgerState()
        state.fenced = True
        dirty.add(ledger_id)
    elif kind == DELETE:
        (ledger_id,) = _LEDGER.unpack_from(payload, 1)
        delete_ledger(write, ledger_id)  # with its tombstone: refused adds stay refused
        states.pop(ledger_id, None)
        dirty.discard(ledger_id)
    else:
        raise StorageError(f"journal record of unknown kind {kind!r}")


def write_states(states: dict[int, LedgerState], write: WriteBatch, dirty: set[int]) -> None:
    """Put the changed ledger states into the write batch."""
    for ledger_id in dirty:
        state = states.get(ledger_id)
        if state is not None:
            write.put(state_key(ledger_id), pack_state(state))


def replay(db: Rdict, states: dict[int, LedgerState], directory: str,
           start: Position) -> tuple[int, int]:
    """Apply the journal from ``start`` to RocksDB and ``states``, then flush RocksDB.

    Returns:
        the sequence number the next journal file gets, and how many records
        were replayed.
    """
    options = WriteOptions()
    # A property at run time; rocksdict's stub declares a method.
    options.disable_wal = True  # type: ignore[method-assign,assignment]
    seqs = journal_files(directory)
    if seqs:
        log.info("journal %s: replaying from file %d offset %d", directory, start.seq,
                 start.offset)
    replayed = 0
    for seq in seqs:
        if seq < start.seq:
            continue
        offset = start.offset if seq == start.seq else 0
        write = WriteBatch(raw_mode=True)
        dirty: set[int] = set()
        for _end, payload in read_records(os.path.join(directory, file_name(seq)), offset):
            apply_record(payload, states, write, dirty)
            replayed += 1
            if write.len() >= 10_000:  # a bounded batch: a big journal is replayed in steps
                write_states(states, write, dirty)
                db.write(write, options)
                write, dirty = WriteBatch(raw_mode=True), set()
        write_states(states, write, dirty)
        if not write.is_empty():
            db.write(write, options)
    db.flush(True)
    if replayed:
        log.info("journal %s: replayed %d records", directory, replayed)
    return (max(seqs) + 1 if seqs else max(start.seq, 1)), replayed
