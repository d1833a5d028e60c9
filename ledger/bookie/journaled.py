"""The journal side of a bookie's store: open and replay, commit, read-back, close.

``JournaledWrites`` composes the parts that own the journal's state: the
``JournalWriter`` (the current file), the ``WriteCache`` (acknowledged
entries not yet in RocksDB) and the ``Flusher`` (RocksDB in the background,
checkpoints). ``RocksDBLedgerStorage`` owns one when ``BookieConfig.journal``
is ``on`` and calls ``commit`` from its writer thread for each group commit.

Start: the journal directory is created, replayed from the checkpoint into
RocksDB and the ledger states (``ledger.bookie.replay``), a new journal file
is started, and the checkpoint moved to it; the replayed files are deleted.
A crash anywhere in this leaves the old checkpoint or the new one, and both
replay to the same state.
"""

from __future__ import annotations

import os
import time

from rocksdict import Rdict

from ledger.api import AddRequest
from ledger.bookie.checkpoint import delete_before, read_checkpoint, write_checkpoint
from ledger.bookie.flusher import Flusher
from ledger.bookie.journal import JournalWriter
from ledger.bookie.ops import LedgerState
from ledger.bookie.replay import replay
from ledger.bookie.write_cache import WriteCache
from ledger.config import BookieConfig
from ledger.errors import StorageError

__all__ = ["JournaledWrites"]


class JournaledWrites:
    """A store's journal, write cache and background flusher (see the module doc)."""

    def __init__(self, config: BookieConfig, db: Rdict, states: dict[int, LedgerState], *,
                 sync: bool) -> None:
        directory = self.directory = config.journal_directory
        try:
            os.makedirs(directory, exist_ok=True)
            start = read_checkpoint(directory)
            next_seq, self.replayed = replay(db, states, directory, start)
            self._writer = JournalWriter(directory, next_seq, config.journal_file_bytes,
                                         sync=sync)
            write_checkpoint(directory, self._writer.position)
        except StorageError:
            raise
        except Exception as error:  # OSError, or rocksdict's plain Exception
            raise StorageError(f"cannot open the bookie journal at {directory}: {error}") \
                from error
        delete_before(directory, next_seq)
        self._cache = WriteCache()
        self._flusher = Flusher(db, directory, self._cache, self._writer.position,
                                max(4 * config.max_batch_bytes, 256 * 1024 * 1024))
        self._token = 0

    @property
    def failure(self) -> StorageError | None:
        """Why the background RocksDB writes stopped (the store then refuses changes)."""
        return self._flusher.failure

    def commit(self, records: list[bytes], changes: list[AddRequest | int],
               states: list[tuple[bytes, bytes]], data_bytes: int) -> float:
        """Journal a group commit durably, then hand it to the background writer.

        ``records`` are the framed records' pieces; ``changes`` the batch's adds
        and deleted ledger ids, in order; ``states`` the changed ledger states'
        keys and values. Returns the seconds the append and sync took.

        Raises:
            OSError: the journal write or sync failed: none of it is acknowledged
                (the records may or may not be in the file: unknown, like any
                failed write; ``rotate`` before the next commit).
        """
        started = time.perf_counter()
        end = self._writer.append(records)
        elapsed = time.perf_counter() - started
        self._token += 1
        token = self._token
        cache = self._cache
        for change in changes:
            if isinstance(change, int):
                cache.drop_ledger(change)
            else:
                cache.put(token, change)
        self._flusher.submit(changes, states, end, token, data_bytes)
        return elapsed

    def rotate(self) -> None:
        """Continue in a new journal file (after a failed write). ``OSError`` if it cannot."""
        self._writer.rotate()

    def drain(self) -> None:
        """Wait until RocksDB holds everything journaled so far (or the flusher failed)."""
        self._flusher.drain()

    def cached(self, ledger_id: int, first_entry_id: int,
               last_entry_id: int) -> list[tuple[int, int, bytes]]:
        """Acknowledged entries of a ledger in the range not yet (known to be) in RocksDB."""
        return self._cache.read(ledger_id, first_entry_id, last_entry_id)

    def close(self) -> None:
        """Write what is queued to RocksDB, checkpoint, close the journal file."""
        self._flusher.close()
        self._writer.close()
