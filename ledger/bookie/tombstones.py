"""A bookie's deleted ledgers: tombstones read back at start, the expired ones dropped.

A delete leaves ``0x04 | ledger_id`` in RocksDB (``ledger.bookie.ops.delete_ledger``,
also on a journal replay of the delete). The store refuses every later add or
fence of such a ledger with ``LedgerDeletedError``: without the tombstone an add
from a writer still holding the old handle (a broker whose copy of a deleted
segment is not dropped yet) would re-create the ledger on the bookie, be
acknowledged, and be stored in no segment (and leak the ledger's entries).

Ledger ids come from a counter and are never reused, so a tombstone is needed
only while some writer may still hold a handle opened before the delete. It is
dropped ``TOMBSTONE_RETENTION_S`` after the delete, when a bookie starts: a few
bytes per deleted ledger meanwhile.
"""

from __future__ import annotations

import time

from rocksdict import Rdict, WriteBatch

from ledger.bookie.ops import TOMBSTONE, TOMBSTONE_RETENTION_S
from ledger.errors import LedgerDeletedError, StorageError

__all__ = ["deleted_error", "load_tombstones"]


def deleted_error(ledger_id: int) -> LedgerDeletedError:
    """What an add or a fence of a deleted ledger is answered with."""
    return LedgerDeletedError(f"ledger {ledger_id} was deleted", ledger_id=ledger_id)


def load_tombstones(db: Rdict, now: float | None = None) -> set[int]:
    """The ids of the deleted ledgers whose tombstones are kept; drop the expired ones.

    Raises:
        StorageError: RocksDB cannot be read or written.
    """
    try:
        return _load(db, now)
    except Exception as error:  # rocksdict raises plain Exception on I/O errors
        raise StorageError(f"cannot read the deleted ledgers: {error}") from error


def _load(db: Rdict, now: float | None) -> set[int]:
    cutoff = (time.time() if now is None else now) - TOMBSTONE_RETENTION_S
    deleted: set[int] = set()
    expired = WriteBatch(raw_mode=True)
    # A live rocksdict iterator keeps the database locked after close().
    iterator = db.iter()
    try:
        iterator.seek(TOMBSTONE)
        while iterator.valid():
            key: bytes = iterator.key()
            if not key.startswith(TOMBSTONE):
                break
            if int.from_bytes(iterator.value(), "big") < cutoff:
                expired.delete(key)
            else:
                deleted.add(int.from_bytes(key[1:], "big"))
            iterator.next()
    finally:
        del iterator
    if not expired.is_empty():
        # Unsynced: a crash before it reaches disk only keeps a tombstone longer.
        db.write(expired)
    return deleted
