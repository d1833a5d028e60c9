"""Snapshots of a transaction buffer, chunked on a compacted topic (PIP-178); crash windows.

Format (version 1)
------------------

A snapshot of segment ``S`` is ``k + 1`` records: ``S-1 … S-k`` ("chunks") and
``S-end`` (the last chunk). Every record is one little-endian header
(``HEADER``, 83 bytes) followed by four columns of ``count`` 8-byte integers:
the txn ids' most significant halves (u64), their least significant halves
(u64), the abort markers' ledger ids (i64) and entry ids (i64). Columns rather
than rows so that encoding and decoding are a few ``array`` copies, not work per
abort. The header holds:

* ``magic`` ``b"FTBS"``, ``format_version`` (1) and ``kind`` (chunk or end);
* ``snapshot_id``: one number per snapshot, growing across restarts, so that
  recovery can tell records of different snapshots apart;
* ``index``: a chunk's number ``i``; in the end record, ``k``;
* ``low`` (exclusive) and ``high`` (inclusive): the range of marker positions
  this record covers in its snapshot's abort list. The lists are sorted by
  marker position and cut into consecutive runs, so chunk ``i`` holds exactly
  the snapshot's aborts with positions in ``(low, high]``; ``low`` of chunk 1 is
  ``EARLIEST`` and ``high`` of the end record is unbounded;
* ``max_read_position``: meaningful in the end record only.

Records never exceed ``chunk_bytes`` (at most the store's ``max_record_bytes``):
every chunk but the end holds ``(chunk_bytes - 83) // 32`` aborts, the end the
rest. A snapshot whose aborts fit in one record is just ``S-end``.

Writing and its crash windows
-----------------------------

A snapshot writes ``S-1 … S-k`` in order, then ``S-end``, then tombstones for
``S-(k+1) …`` up to the highest chunk number an earlier snapshot may have left.
Snapshots of a segment never interleave (the buffer writes one at a time).

* Crash before ``S-end``: the store holds the new chunks ``1..j``, older chunks
  ``j+1..`` and the previous ``S-end`` (snapshot ``E``). The previous snapshot
  is no longer whole, but it need not be: the new abort list is ``E``'s list
  with a prefix removed by retention and later markers appended, so the new
  chunk ``j`` reaches at least as far in marker positions as ``E``'s chunk
  ``j`` did, and ``E``'s aborts lost under the keys ``1..j`` are either in the
  new chunks ``1..j`` or were removed by retention, whose ledger (and with it
  the aborted entries, which come before their marker) is gone. This is the
  seed's scenarios 2 and 3. Recovery does not take that argument on trust: it
  checks that the ``(low, high]`` ranges of the records of snapshot ``E`` or
  newer cover every position without a gap (chunk ``j`` of a newer snapshot
  covers at least what chunk ``j`` of ``E`` did, since every abort of ``E``
  still retained is in the newer list). Should they not — the chunk size was
  changed between the two snapshots, say — it drops the snapshot and replays
  the whole segment: slower, never wrong.
* Crash after ``S-end`` but before the tombstones: chunks ``k+1..`` of an
  older, longer snapshot survive. Their ids are below the end's, so recovery
  ignores them; every abort they hold that retention kept is also in the newer
  snapshot. The next snapshot tombstones them again.
* Compaction racing a write changes nothing of the above: readers see the
  latest record per key, which is the state of some prefix of the write
  sequence, exactly as after a crash at that point.

Recovery unions the aborts of the end record and of every chunk of snapshot
``E`` or newer (newer ones belong to a snapshot that crashed half-way: all
their aborts are real, since an abort is final), takes ``E``'s
``max_read_position`` and replays the segment after it. Aborts that recovery
keeps but no longer needs are harmless: they name transactions that really
aborted, and the next retention pass drops them with their ledger.
``max_read_position`` never runs ahead of the data: it was the buffer's value
when ``E`` was captured, computed only from entries the owner reported as
durably appended.
"""

from __future__ import annotations

import logging
import struct
import sys
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Final

from txnbuffer.api import EARLIEST, Position, SnapshotStore, TxnId
from txnbuffer.errors import SnapshotFormatError

__all__ = [
    "FORMAT_VERSION",
    "HEADER",
    "ITEM_BYTES",
    "LoadedSnapshot",
    "SnapshotRecord",
    "chunk_capacity",
    "decode_record",
    "encode_snapshot",
    "load_snapshot",
    "write_snapshot",
]

FORMAT_VERSION: Final = 1
MAGIC: Final = b"FTBS"
KIND_CHUNK: Final = 1
KIND_END: Final = 2
#: magic, format_version, kind, snapshot_id, index, low, high, max_read_position, count.
HEADER: Final = struct.Struct("<4sHBQIqqqqqqI")
#: Bytes per abort: two u64 halves of the txn id, the marker's ledger and entry ids.
ITEM_BYTES: Final = 32
_UNBOUNDED: Final = Position(2**63 - 1, 2**63 - 1)
_SWAP: Final = sys.byteorder != "little"

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SnapshotRecord:
    """One decoded record: a chunk, or the end record.

    Attributes:
        key: the store key it was read under.
        is_end: whether it is the ``-end`` record.
        snapshot_id: the snapshot it belongs to.
        index: a chunk's number; for the end record the number of chunks before it.
        low: covered marker positions start after this.
        high: covered marker positions end here (inclusive).
        max_read_position: the snapshot's, in the end record.
        payload: the undecoded abort columns.
        count: how many aborts the payload holds.
    """

    key: str
    is_end: bool
    snapshot_id: int
    index: int
    low: Position
    high: Position
    max_read_position: Position
    payload: memoryview = field(repr=False)
    count: int

    def aborts(self) -> tuple[list[TxnId], list[Position]]:
        """The record's aborts: txn ids and marker positions, in position order."""
        columns = []
        n = self.count
        for column, code in enumerate("QQqq"):
            values = array(code)
            values.frombytes(self.payload[column * 8 * n : (column + 1) * 8 * n])
            if _SWAP:
                values.byteswap()
            columns.append(values)
        most, least, ledger_ids, entry_ids = columns
        return (
            list(zip(most, least, strict=True)),
            list(map(Position, ledger_ids, entry_ids)),
        )


@dataclass(slots=True)
class LoadedSnapshot:
    """What recovery takes from the store for one segment.

    Attributes:
        txn_ids: aborted transactions to restore (parallel to ``positions``).
        positions: their abort markers' positions.
        max_read_position: where to replay the segment from; None to replay it all.
        last_snapshot_id: the highest snapshot id seen (complete or not).
        last_chunk_index: the highest chunk number present under the segment's keys.
        full_replay_reason: why no snapshot could be used, when none was.
    """

    txn_ids: list[TxnId] = field(default_factory=list)
    positions: list[Position] = field(default_factory=list)
    max_read_position: Position | None = None
    last_snapshot_id: int = 0
    last_chunk_index: int = 0
    full_replay_reason: str | None = None


def chunk_capacity(chunk_bytes: int) -> int:
    """How many aborts fit in one record of at most ``chunk_bytes`` bytes.

    Raises:
        ValueError: if not even one abort fits.
    """
    capacity = (chunk_bytes - HEADER.size) // ITEM_BYTES
    if capacity < 1:
        raise ValueError(f"chunk_bytes={chunk_bytes} cannot hold one abort "
                         f"({HEADER.size + ITEM_BYTES} bytes at least)")
    return capacity


def _pack(snapshot_id: int, *, is_end: bool, index: int, low: Position, high: Position,
          max_read_position: Position, txn_ids: Sequence[TxnId],
          positions: Sequence[Position]) -> bytes:
    header = HEADER.pack(MAGIC, FORMAT_VERSION, KIND_END if is_end else KIND_CHUNK,
                         snapshot_id, index, *low, *high, *max_read_position, len(txn_ids))
    if not txn_ids:
        return header
    first, second = itemgetter(0), itemgetter(1)
    parts = [header]
    for code, rows, column_of in (("Q", txn_ids, first), ("Q", txn_ids, second),
                                  ("q", positions, first), ("q", positions, second)):
        column = array(code, map(column_of, rows))
        if _SWAP:
            column.byteswap()
        parts.append(column.tobytes())
    return b"".join(parts)


def encode_snapshot(snapshot_id: int, txn_ids: Sequence[TxnId], positions: Sequence[Position],
                    max_read_position: Position, chunk_bytes: int) -> list[bytes]:
    """Encode a snapshot as its records: chunks ``1..k`` then the end record.

    Args:
        snapshot_id: this snapshot's id.
        txn_ids: aborted transactions, in the order of ``positions``.
        positions: their abort markers' positions, ascending.
        max_read_position: the buffer's, at the moment the aborts were taken.
        chunk_bytes: the largest record to produce.

    Returns:
        ``k + 1`` records; the last is the end record.
    """
    capacity = chunk_capacity(chunk_bytes)
    total = len(txn_ids)
    chunks = max(0, -(-total // capacity) - 1)
    records = []
    low = EARLIEST
    for number in range(1, chunks + 1):
        start, stop = (number - 1) * capacity, number * capacity
        high = positions[stop - 1]
        records.append(_pack(snapshot_id, is_end=False, index=number, low=low, high=high,
                             max_read_position=EARLIEST, txn_ids=txn_ids[start:stop],
                             positions=positions[start:stop]))
        low = high
    start = chunks * capacity
    records.append(_pack(snapshot_id, is_end=True, index=chunks, low=low, high=_UNBOUNDED,
                         max_read_position=max_read_position, txn_ids=txn_ids[start:],
                         positions=positions[start:]))
    return records


def decode_record(key: str, value: bytes) -> SnapshotRecord:
    """Decode a record's header; the aborts stay packed until ``aborts()`` is called.

    Raises:
        SnapshotFormatError: bad magic, an unknown version or kind, a wrong length.
    """
    if len(value) < HEADER.size:
        raise SnapshotFormatError(f"{len(value)} bytes, shorter than a header", key=key)
    (magic, version, kind, snapshot_id, index, low_ledger, low_entry, high_ledger, high_entry,
     read_ledger, read_entry, count) = HEADER.unpack_from(value)
    if magic != MAGIC:
        raise SnapshotFormatError(f"bad magic {magic!r}", key=key)
    if version != FORMAT_VERSION:
        raise SnapshotFormatError(f"format_version {version}, this code reads "
                                  f"{FORMAT_VERSION}", key=key)
    if kind not in (KIND_CHUNK, KIND_END):
        raise SnapshotFormatError(f"unknown kind {kind}", key=key)
    if len(value) != HEADER.size + count * ITEM_BYTES:
        raise SnapshotFormatError(f"{len(value)} bytes for {count} aborts", key=key)
    return SnapshotRecord(key=key, is_end=kind == KIND_END, snapshot_id=snapshot_id,
                          index=index, low=Position(low_ledger, low_entry),
                          high=Position(high_ledger, high_entry),
                          max_read_position=Position(read_ledger, read_entry),
                          payload=memoryview(value)[HEADER.size:], count=count)


def _segment_records(segment: str, values: Mapping[str, bytes],
                     ) -> tuple[list[SnapshotRecord], list[tuple[str, SnapshotFormatError]]]:
    """The records of ``segment`` among ``values``, checked against their keys.

    Returns the good records, and the keys of the bad ones with why.
    """
    prefix = f"{segment}-"
    records = []
    bad: list[tuple[str, SnapshotFormatError]] = []
    for key, value in values.items():
        suffix = key[len(prefix):]
        if not key.startswith(prefix) or not (suffix == "end" or suffix.isdigit()):
            continue  # another segment whose name starts with ours followed by "-"
        try:
            record = decode_record(key, value)
            if record.is_end != (suffix == "end") or (
                    not record.is_end and record.index != int(suffix)):
                raise SnapshotFormatError("record does not match its key", key=key,
                                          segment=segment)
        except SnapshotFormatError as error:
            bad.append((key, error))
            continue
        records.append(record)
    return records, bad


def _has_gap(records: Sequence[SnapshotRecord]) -> bool:
    """Whether the ``(low, high]`` ranges of ``records`` leave any position uncovered."""
    reach = EARLIEST
    for record in sorted(records, key=lambda record: record.low):
        if record.low > reach:
            return True
        reach = max(reach, record.high)
    return reach != _UNBOUNDED


async def load_snapshot(store: SnapshotStore, segment: str) -> LoadedSnapshot:
    """Read every record of ``segment`` and choose what recovery may rely on.

    See the module docstring for why the chosen aborts and position are correct
    whatever prefix of a snapshot write reached the store.

    A record that cannot be decoded (bad magic, unknown version, wrong length,
    not matching its key) is logged at ERROR and the whole snapshot is left
    aside: the segment is replayed from its start, which rebuilds the aborts
    from the markers themselves (slower, never wrong). The next snapshot
    overwrites the bad record (its chunk number counts in
    ``last_chunk_index``, so a bad chunk key gets a tombstone).
    """
    records, bad = _segment_records(segment, await store.read_prefix(f"{segment}-"))
    bad_chunks = [int(key.rpartition("-")[2]) for key, _ in bad
                  if key.rpartition("-")[2].isdigit()]
    loaded = LoadedSnapshot(
        last_snapshot_id=max((record.snapshot_id for record in records), default=0),
        last_chunk_index=max([record.index for record in records if not record.is_end]
                             + bad_chunks, default=0))
    if bad:
        for key, error in bad:
            log.error("segment %s: transaction buffer snapshot record %r is unreadable "
                      "(%s); the snapshot is left aside", segment, key, error)
        loaded.full_replay_reason = f"{len(bad)} unreadable snapshot record(s)"
        return loaded
    end = next((record for record in records if record.is_end), None)
    if end is None:
        loaded.full_replay_reason = "no complete snapshot" if records else None
        return loaded
    usable = [record for record in records if record.snapshot_id >= end.snapshot_id]
    if _has_gap(usable):
        loaded.full_replay_reason = (f"the chunks of snapshot {end.snapshot_id} and newer "
                                     "leave a gap in marker positions")
        return loaded
    for record in usable:
        txn_ids, positions = record.aborts()
        loaded.txn_ids += txn_ids
        loaded.positions += positions
    loaded.max_read_position = end.max_read_position
    return loaded


async def write_snapshot(store: SnapshotStore, segment: str, records: Sequence[bytes],
                         stale_chunks_through: int) -> None:
    """Write encoded ``records`` (chunks then end), then tombstone leftover chunks.

    Args:
        store: the compacted snapshot topic.
        segment: whose snapshot it is.
        records: from ``encode_snapshot``: chunks ``1..k``, then the end record.
        stale_chunks_through: the highest chunk number older snapshots may have
            left; chunks ``k+1`` to it are deleted after the end record is written.
    """
    *chunks, end = records
    for number, chunk in enumerate(chunks, start=1):
        await store.write(f"{segment}-{number}", chunk)
    await store.write(f"{segment}-end", end)
    for number in range(len(chunks) + 1, stale_chunks_through + 1):
        await store.write(f"{segment}-{number}", None)
