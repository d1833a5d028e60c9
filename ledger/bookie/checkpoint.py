"""The journal's checkpoint: where replay starts, and which journal files may go.

A checkpoint is taken only after RocksDB was flushed (its memtables written to
synced SST files): everything journaled before the checkpoint's position is
then in RocksDB without the journal, so replay starts there and the files
before it are deleted. The marker is one small file, ``checkpoint``, replaced
atomically (written to a temporary file, fsynced, renamed, directory
fsynced)::

    b"FJC1" | seq (8) | offset (8) | crc32c of the 20 bytes before (4)

Crash windows: killed before the rename, the old checkpoint stands and replay
starts earlier (records are idempotent); killed after the rename but before
the old files are deleted, they are deleted at the next checkpoint or start.
"""

from __future__ import annotations

import logging
import os
import struct
from typing import Final

from crc32c import crc32c

from ledger.bookie.journal import Position, file_name, fsync_dir, journal_files
from ledger.errors import StorageError

__all__ = ["delete_before", "read_checkpoint", "write_checkpoint"]

log = logging.getLogger(__name__)

_NAME: Final = "checkpoint"
_MAGIC: Final = b"FJC1"
_BODY: Final = struct.Struct("<4sqq")
_CRC: Final = struct.Struct("<I")


def read_checkpoint(directory: str) -> Position:
    """The position replay starts from: (0, 0), the whole journal, when there is no marker.

    Raises:
        StorageError: the marker exists but is not one (it is replaced atomically,
            so this is damage, not a crash).
    """
    path = os.path.join(directory, _NAME)
    try:
        with open(path, "rb") as file:
            data = file.read()
    except FileNotFoundError:
        return Position(0, 0)
    if (len(data) != _BODY.size + _CRC.size
            or crc32c(data[:_BODY.size]) != _CRC.unpack_from(data, _BODY.size)[0]):
        raise StorageError(f"journal checkpoint {path} is damaged")
    magic, seq, offset = _BODY.unpack_from(data)
    if magic != _MAGIC:
        raise StorageError(f"journal checkpoint {path} is not a Folio checkpoint")
    return Position(seq, offset)


def write_checkpoint(directory: str, position: Position) -> None:
    """Durably record that replay starts at ``position`` (RocksDB holds all before it)."""
    body = _BODY.pack(_MAGIC, position.seq, position.offset)
    path = os.path.join(directory, _NAME)
    temporary = path + ".tmp"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        os.write(fd, body + _CRC.pack(crc32c(body)))
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temporary, path)
    fsync_dir(directory)


def delete_before(directory: str, seq: int) -> int:
    """Delete the journal files before ``seq`` (all checkpointed); how many went."""
    deleted = 0
    for old in journal_files(directory):
        if old >= seq:
            break
        try:
            os.unlink(os.path.join(directory, file_name(old)))
            deleted += 1
        except FileNotFoundError:
            pass
        except OSError as error:  # a file left behind costs disk, not correctness
            log.warning("journal: cannot delete %s: %s", file_name(old), error)
    return deleted
