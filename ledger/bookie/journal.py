"""The bookie's journal: its record format and the writer that appends and syncs it.

A journal is a directory of files ``journal-<seq>.log`` (``seq``: 16 hex
digits, increasing). Each file grows to ``BookieConfig.journal_file_bytes``
(then the next one starts), preallocated ahead of the writes in
``PREALLOC_BYTES`` steps, as BookKeeper's ``journalPreAllocSizeMB``: a sync
then rarely updates the file's size, and a bookie that writes little takes
little disk. Preallocated by writing zeros, not ``posix_fallocate``: on ext4
(and XFS) a fallocated range is *unwritten* extents, and the first write
into each block converts it, a metadata change, so every group commit's
``fdatasync`` also committed the file system's journal; over written zeros
it flushes the data alone (measured on this machine, 2 KiB appends each
``fdatasync``ed: mean 0.25-0.31 ms against 0.37-0.42, p99 0.6-3.7 against
3.0-3.4; docs/bench.md, "Where end-to-end time goes"). It is filled from the start with records::

    length (4, little-endian) | crc32c(payload) (4) | payload (length bytes)

A length of 0 ends the file (the preallocated rest is zeros), and so does its end; a record whose
checksum does not match, or that runs past the end of the file, is a torn
write and ends the file too (``ledger.bookie.replay``). Payloads:

* add:    ``b"A" | ledger_id (8) | lac (8) | count (4) | entry_ids (8 each) |
  lengths (8 each) | data sizes (4 each) | data...`` (integers little-endian)
* fence:  ``b"F" | ledger_id (8)``
* delete: ``b"D" | ledger_id (8)``

Only accepted changes are journaled (an add refused as fenced is not), so a
replay applies every record unconditionally.

``JournalWriter.append`` writes one group commit's records with
``os.pwritev`` (the entries' bytes as they came, no copy in Python; the
checksum runs over the pieces) and, under ``sync`` durability, one
``os.fdatasync``: both
release the GIL, so the event loop keeps taking requests while the disk
works and the next group commit forms. A new file is made durable (file and
directory fsynced) before any record in it is acknowledged.
"""

from __future__ import annotations

import os
import re
import struct
import sys
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from crc32c import crc32c

__all__ = [
    "ADD",
    "DELETE",
    "FENCE",
    "HEADER",
    "JournalWriter",
    "Position",
    "encode_add",
    "encode_ledger_op",
    "file_name",
    "frame",
    "fsync_dir",
    "journal_files",
    "zero_fill",
]

HEADER: Final = struct.Struct("<II")
ADD: Final = b"A"
FENCE: Final = b"F"
DELETE: Final = b"D"
_ADD_HEAD: Final = struct.Struct("<qqI")
_LEDGER: Final = struct.Struct("<q")
_NAME: Final = re.compile(r"^journal-([0-9a-f]{16})\.log$")
_SWAP: Final = sys.byteorder != "little"
#: The steps in which a journal file is preallocated ahead of its writes.
PREALLOC_BYTES: Final = 4 * 1024 * 1024
_IOV_MAX: Final = min(os.sysconf("SC_IOV_MAX"), 1024) if hasattr(os, "sysconf") else 16
#: What a preallocation writes, a piece at a time.
_ZEROS: Final = memoryview(bytes(1024 * 1024))


@dataclass(frozen=True, order=True, slots=True)
class Position:
    """A place in the journal: the file's sequence number and a byte offset in it."""

    seq: int
    offset: int


def file_name(seq: int) -> str:
    """The name of journal file ``seq``."""
    return f"journal-{seq:016x}.log"


def journal_files(directory: str) -> list[int]:
    """The sequence numbers of the journal files in ``directory``, ascending."""
    seqs = []
    for name in os.listdir(directory):
        match = _NAME.match(name)
        if match:
            seqs.append(int(match.group(1), 16))
    return sorted(seqs)


def fsync_dir(directory: str) -> None:
    """Make a directory's entries (created, renamed, deleted files) durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def zero_fill(fd: int, start: int, end: int) -> None:
    """Write zeros over ``[start, end)`` of ``fd`` (a preallocation: see the module docstring)."""
    offset = start
    while offset < end:
        offset += os.pwrite(fd, _ZEROS[:min(len(_ZEROS), end - offset)], offset)


def _ints(typecode: str, values: Iterable[int]) -> bytes:
    packed = array(typecode, values)
    if _SWAP:
        packed.byteswap()
    return packed.tobytes()


def encode_add(ledger_id: int, last_add_confirmed: int, entry_ids: Sequence[int],
               lengths: Sequence[int], datas: Sequence[bytes]) -> list[bytes]:
    """The payload of an add record, in pieces: its head, then each entry's data as given."""
    head = b"".join((
        ADD, _ADD_HEAD.pack(ledger_id, last_add_confirmed, len(datas)),
        _ints("q", entry_ids), _ints("q", lengths), _ints("I", map(len, datas)),
    ))
    return [head, *datas]


def encode_ledger_op(kind: bytes, ledger_id: int) -> list[bytes]:
    """The payload of a fence or delete record."""
    return [kind + _LEDGER.pack(ledger_id)]


def frame(payload: list[bytes]) -> list[bytes]:
    """A record in pieces: its header (length, checksum of the pieces), then the payload's."""
    checksum = 0
    length = 0
    for piece in payload:
        checksum = crc32c(piece, checksum)
        length += len(piece)
    return [HEADER.pack(length, checksum), *payload]


class JournalWriter:
    """Appends records to the journal's current file; rotates to a new one when full.

    Used by one thread (the storage's writer). ``position`` is where the next
    record goes; records before it are durable once ``append`` returned.
    """

    def __init__(self, directory: str, first_seq: int, file_bytes: int, *, sync: bool) -> None:
        self._directory = directory
        self._file_bytes = file_bytes
        self._sync = sync
        self._fd = -1
        self._size = 0  # allocated so far
        self._limit = 0  # the size at which the file is full
        self._seq = first_seq - 1
        self._offset = 0
        self._open_next(0)

    @property
    def position(self) -> Position:
        """Where the next record will be written."""
        return Position(self._seq, self._offset)

    def _open_next(self, needed: int) -> None:
        """Start the next file, large enough for ``needed`` bytes, durable before use."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        seq = self._seq + 1
        limit = max(self._file_bytes, needed + HEADER.size)
        size = min(limit, max(PREALLOC_BYTES, needed + HEADER.size))
        path = os.path.join(self._directory, file_name(seq))
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        try:
            zero_fill(fd, 0, size)
            os.fsync(fd)
            fsync_dir(self._directory)
        except BaseException:
            os.close(fd)
            raise
        self._fd, self._seq, self._offset, self._size, self._limit = fd, seq, 0, size, limit

    def _extend(self, end: int) -> None:
        """Preallocate the current file to at least ``end`` (a step more, up to its limit).

        The next ``fdatasync`` makes the new size durable with the records
        written into it (the size is metadata a read needs).
        """
        size = min(self._limit, max(end, self._size + PREALLOC_BYTES))
        zero_fill(self._fd, self._size, size)
        self._size = size

    def append(self, pieces: list[bytes]) -> Position:
        """Write framed records' ``pieces`` and (under sync durability) fdatasync; the end.

        Raises:
            OSError: the write or the sync failed; nothing of this call may be
                relied on (the caller fails the operations and rotates).
        """
        size = sum(map(len, pieces))
        # Room for the records and for the zero length that ends the file.
        if self._offset + size + HEADER.size > self._limit:
            self._open_next(size)
        if self._offset + size + HEADER.size > self._size:
            self._extend(self._offset + size + HEADER.size)
        offset = self._offset
        for first in range(0, len(pieces), _IOV_MAX):
            chunk = pieces[first:first + _IOV_MAX]
            wanted = sum(map(len, chunk))
            written = os.pwritev(self._fd, chunk, offset)
            if written < wanted:  # a short write (e.g. interrupted): the rest, joined
                rest = memoryview(b"".join(chunk))[written:]
                while rest:
                    done = os.pwrite(self._fd, rest, offset + written)
                    rest = rest[done:]
                    written += done
            offset += wanted
        if self._sync:
            os.fdatasync(self._fd)
        self._offset = offset
        return Position(self._seq, self._offset)

    def rotate(self) -> None:
        """Continue in a new file (after a failed write left this one in doubt)."""
        self._open_next(0)

    def close(self) -> None:
        """Close the current file. Idempotent."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
