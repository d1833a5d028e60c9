"""Journaled group commits into RocksDB, in the background, and the checkpoints.

The storage's writer hands each journaled (hence acknowledged) group commit
here (its adds and deletes in order, the changed ledger states, the journal
position it ends at). One thread builds its RocksDB ``WriteBatch`` and writes
them in order without RocksDB's WAL (the journal is the log),
releases their entries from the write cache, and checkpoints whenever the
journal moved on to a new file: RocksDB flush, checkpoint marker, old files
deleted (``ledger.bookie.checkpoint``).

Back-pressure: the writer blocks in ``submit`` while more than
``max_pending_bytes`` wait here, so a disk that takes the journal faster than
RocksDB takes the entries bounds memory instead of growing it.

Failure: if RocksDB refuses a write here, the entries are still durable in
the journal (and served from the write cache); the store refuses new changes
(``failure``) and the next start replays them.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from typing import Final

from rocksdict import Rdict, WriteBatch, WriteOptions

from ledger.api import AddRequest
from ledger.bookie.checkpoint import delete_before, write_checkpoint
from ledger.bookie.journal import Position
from ledger.bookie.ops import delete_ledger, put_entries
from ledger.bookie.write_cache import WriteCache
from ledger.errors import StorageError

__all__ = ["Flusher"]

log = logging.getLogger(__name__)

# Adds and deleted ledger ids in order, ledger states, end position, cache token, bytes.
_Item = tuple[list[AddRequest | int], list[tuple[bytes, bytes]], Position, int, int]
_STOP: Final = object()


class Flusher:
    """The background RocksDB writer of a journaled store (see the module doc)."""

    def __init__(self, db: Rdict, directory: str, cache: WriteCache, checkpoint: Position,
                 max_pending_bytes: int) -> None:
        self._db = db
        self._directory = directory
        self._cache = cache
        self._checkpoint = checkpoint
        self._max_pending = max_pending_bytes
        self._options = WriteOptions()
        # A property at run time; rocksdict's stub declares a method.
        self._options.disable_wal = True  # type: ignore[method-assign,assignment]
        self._items: deque[_Item] = deque()
        self._pending = 0
        self._applied: Position | None = None
        self._stopping = False
        self._condition = threading.Condition()
        self.failure: StorageError | None = None
        self._thread = threading.Thread(target=self._run, name="bookie-flusher", daemon=True)
        self._thread.start()

    def submit(self, changes: list[AddRequest | int], states: list[tuple[bytes, bytes]],
               end: Position, token: int, size: int) -> None:
        """Queue a journaled group commit; blocks while too much waits (back-pressure)."""
        with self._condition:
            while (self._pending > self._max_pending and self.failure is None
                   and not self._stopping):
                self._condition.wait()
            self._items.append((changes, states, end, token, size))
            self._pending += size
            self._condition.notify_all()

    def _run(self) -> None:
        while True:
            with self._condition:
                while not self._items and not self._stopping:
                    self._condition.wait()
                if not self._items:
                    return
                changes, states, end, token, size = self._items[0]
            if self.failure is None:
                try:
                    write = WriteBatch(raw_mode=True)
                    for change in changes:
                        if isinstance(change, int):
                            delete_ledger(write, change)
                        else:
                            put_entries(write, change)
                    for key, value in states:
                        write.put(key, value)
                    if not write.is_empty():
                        self._db.write(write, self._options)
                    self._cache.release(token)
                    self._applied = end
                    if end.seq > self._checkpoint.seq:
                        self._take_checkpoint(end)
                except Exception as error:  # rocksdict raises plain Exception on I/O errors
                    log.error("bookie storage: writing journaled entries to RocksDB failed "
                              "(%s); they stay in the journal and are replayed at start", error)
                    self.failure = StorageError(
                        f"bookie storage failed to write journaled entries to RocksDB: {error}")
            with self._condition:
                self._items.popleft()
                self._pending -= size
                self._condition.notify_all()

    def _take_checkpoint(self, position: Position) -> None:
        # Crash windows: before the flush completes nothing changed; after it,
        # before the marker, replay starts at the old checkpoint (idempotent).
        self._db.flush(True)
        write_checkpoint(self._directory, position)
        self._checkpoint = position
        delete_before(self._directory, position.seq)

    def drain(self) -> None:
        """Wait until everything submitted so far is written (or failed)."""
        with self._condition:
            while self._items:
                self._condition.wait()

    def close(self) -> None:
        """Write what is queued, checkpoint, stop the thread. Idempotent."""
        with self._condition:
            self._stopping = True
            self._condition.notify_all()
        self._thread.join()
        applied = self._applied
        if self.failure is None and applied is not None and applied != self._checkpoint:
            try:
                self._take_checkpoint(applied)
            except Exception as error:  # the next start replays instead
                log.warning("bookie storage: final checkpoint failed: %s", error)
