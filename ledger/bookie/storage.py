"""One bookie's store on RocksDB: entries, per-ledger state, and group commit.

The key layout and the operations are in ``ledger.bookie.ops``.

**Group commit.** Every change (add, fence, delete) is an operation queued to
one writer thread, which drains the queue, applies everything it found in one
RocksDB ``WriteBatch`` written once (with fsync under ``sync`` durability), and
only then completes the operations. rocksdict keeps the GIL through the write
and its fsync, so the whole process stalls for each one: few, large batches
from one thread is the only way to be fast.

**Journal.** With ``BookieConfig.journal`` on (the default), a group commit
is made durable by appending its records to the journal and syncing it
(``ledger.bookie.journaled``), not by RocksDB's synced WAL; RocksDB gets the
entries in the background and reads see them in the write cache meanwhile.

**Ordering.** Operations are applied in queue order by that one thread, so a
fence answers only after every add queued before it is durable, and refuses
every add queued after it. This is what makes fencing safe: a recovery that
has fenced a bookie has seen every entry the bookie will ever acknowledge to
the old writer.

**Deleted ledgers.** A delete leaves a tombstone: adds (recovery adds too) and
fences of the ledger are refused with ``LedgerDeletedError`` from its place in
the queue on, for ever (``ledger.bookie.tombstones``).

**Failure.** If a write fails (disk full, data dir read-only, a RocksDB I/O
error), every operation of that batch fails with ``StorageError`` carrying the
RocksDB/OS error text, and so does every later one while the store is failed
(``failure``; counted in ``folio_storage_errors_total``, ``folio_storage_failed``
is 1). The in-memory ledger states may be ahead of the disk then, so they are
read back from disk. Each later commit (and ``ProbeOp``, which the broker sends
periodically while failed) first probes, at most every ``PROBE_INTERVAL_S``:
a tiny synced write, and if that fails RocksDB is reopened (a failed write can
leave it read-only until reopened) and the write tried again. Once a probe
succeeds the store takes writes again, with its states as on disk: nothing
acknowledged was lost (acknowledgements follow durable writes only) and
nothing unacknowledged is counted.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from rocksdict import Options, Rdict, WriteBatch, WriteOptions

from ledger import metrics
from ledger.api import AddRequest, LedgerTail, ReadResult
from ledger.bookie.journal import DELETE, FENCE, encode_add, encode_ledger_op, frame
from ledger.bookie.journaled import JournaledWrites
from ledger.bookie.ops import (
    LENGTH,
    PROBE_INTERVAL_S,
    PROBE_KEY,
    STATE,
    STATE_FORMAT,
    STATE_VERSION,
    AddOp,
    DeleteOp,
    Done,
    FenceOp,
    LedgerState,
    Op,
    ProbeOp,
    delete_ledger,
    entry_key_prefix,
    op_bytes,
    pack_state,
    put_entries,
    state_key,
)
from ledger.bookie.replies import complete
from ledger.bookie.tombstones import deleted_error, load_tombstones
from ledger.config import BookieConfig, Durability, Journal
from ledger.errors import (
    InvalidArgumentError,
    LedgerError,
    LedgerFencedError,
    NoSuchLedgerError,
    StorageError,
)
from ledger.metrics import observe_storage_failure, observe_storage_recovered

__all__ = ["PROBE_INTERVAL_S", "AddOp", "DeleteOp", "FenceOp", "ProbeOp", "RocksDBLedgerStorage"]

log = logging.getLogger(__name__)

@dataclass
class _Batch:
    """What one group commit writes and whom it answers."""

    write: WriteBatch = field(default_factory=lambda: WriteBatch(raw_mode=True))
    dirty: set[int] = field(default_factory=set)
    replies: list[tuple[Done, object]] = field(default_factory=list)
    # Entries and their bytes in this batch (for ``ledger.metrics``).
    entries: int = 0
    data_bytes: int = 0
    # With a journal: its records' pieces, and the adds and deleted ledgers in order
    # (for its write cache and its background RocksDB writer).
    records: list[bytes] = field(default_factory=list)
    changes: list[AddRequest | int] = field(default_factory=list)


class RocksDBLedgerStorage:
    """Entries and ledger state of one bookie in one RocksDB, written by one thread.

    ``submit`` is thread-safe and never blocks on I/O; completion callbacks run
    on the writer thread and must only hand the result over (e.g. with
    ``loop.call_soon_threadsafe``). Reads run on the caller's thread.
    """

    def __init__(self, config: BookieConfig,
                 open_kv: Callable[[str, Options], Rdict] | None = None) -> None:
        # ``open_kv`` is the seam where a test injects storage faults (a wrapper
        # whose writes fail on demand); it opens again on every reopen.
        self._open_kv: Callable[[str, Options], Rdict] = open_kv or Rdict
        self._config = config
        options = Options(raw_mode=True)
        options.create_if_missing(True)
        self._options = options
        # Held by reads (the callers' thread) and by a reopen (the writer thread).
        self._db_lock = threading.Lock()
        self._last_probe = 0.0
        try:
            self._db = self._open_kv(config.data_dir, options)
        except Exception as error:  # rocksdict raises plain Exception on a held lock
            raise StorageError(
                f"cannot open bookie storage at {config.data_dir}: {error}"
            ) from error
        self._write_options = WriteOptions()
        self._synced = config.durability is Durability.SYNC
        self._write_options.sync = self._synced
        self._states: dict[int, LedgerState] = self._load_states()
        self._journal: JournaledWrites | None = None
        try:
            if config.journal is Journal.ON:
                self._journal = JournaledWrites(config, self._db, self._states,
                                                sync=self._synced)
            # After the journal's replay, which puts the tombstones of its deletes.
            # Only the writer thread changes it; it only grows while the store is open.
            self._deleted: set[int] = load_tombstones(self._db)
        except BaseException:
            if self._journal is not None:
                self._journal.close()
            self._db.close()
            raise
        self._queue: queue.SimpleQueue[Op | None] = queue.SimpleQueue()
        self._failure: LedgerError | None = None
        self._closed = False
        self._lifecycle = threading.Lock()
        self._writer = threading.Thread(target=self._run, name="bookie-writer", daemon=True)
        self._writer.start()

    # ----------------------------------------------------------------- state

    def _load_states(self) -> dict[int, LedgerState]:
        states: dict[int, LedgerState] = {}
        # A live rocksdict iterator keeps the database locked after close(),
        # so every iterator is dropped in a finally block.
        iterator = self._db.iter()
        try:
            iterator.seek(STATE)
            while iterator.valid():
                key: bytes = iterator.key()
                if not key.startswith(STATE):
                    break
                version, fenced, lac, last = STATE_FORMAT.unpack(iterator.value())
                if version != STATE_VERSION:
                    raise StorageError(f"ledger state format {version} is unknown")
                states[int.from_bytes(key[1:], "big")] = LedgerState(bool(fenced), lac, last)
                iterator.next()
        finally:
            del iterator
        return states

    def tail(self, ledger_id: int) -> LedgerTail:
        """The ledger's LAC, last held entry and fence bit. ``NoSuchLedgerError`` if unknown."""
        state = self._states.get(ledger_id)
        if state is None:
            raise NoSuchLedgerError(f"this bookie holds no ledger {ledger_id}", ledger_id=ledger_id)
        return state.tail()

    def ledger_ids(self) -> list[int]:
        """Every ledger this bookie holds state for, sorted."""
        return sorted(self._states)

    @property
    def failure(self) -> StorageError | None:
        """Why writes are refused now (the storage error), or None when they are taken."""
        failure = self._failure
        return failure if isinstance(failure, StorageError) else None

    # ---------------------------------------------------------------- writes

    def submit(self, op: Op) -> None:
        """Queue a change for the next group commit; ``op.done`` is called once it is durable."""
        # The lock orders submit against close: an op is either queued before
        # the stop marker (and completed by the writer) or refused here.
        with self._lifecycle:
            if not self._closed:
                self._queue.put(op)
                return
        op.done(StorageError("bookie storage is closed"))

    def _run(self) -> None:
        get = self._queue.get
        get_nowait = self._queue.get_nowait
        while True:
            first = get()
            if first is None:
                return
            ops: list[Op] = [first]
            size = op_bytes(first)
            limit = self._config.max_batch_bytes
            stop = False
            try:
                # Whatever is queued now joins this commit, up to the byte limit;
                # the rest waits in the queue for the next one.
                while size < limit:
                    op = get_nowait()
                    if op is None:
                        stop = True
                        break
                    ops.append(op)
                    size += op_bytes(op)
            except queue.Empty:
                pass
            try:
                self._commit(ops)
            except Exception as error:  # a bug must not kill the only writer thread
                log.error("bookie storage writer failed; refusing changes until a probe "
                          "succeeds", exc_info=True)
                failure = self._failed(f"bookie storage writer failed: {error!r}")
                for op in ops:
                    op.done(failure)
            if stop:
                return

    def _failed(self, message: str) -> StorageError:
        """Enter the failed state: refuse writes, read the states back from disk."""
        failure = self._failure = StorageError(message)
        self._last_probe = time.monotonic()  # the next probe after the interval
        observe_storage_failure()
        if self._journal is not None:
            # RocksDB is behind the journal until the flusher wrote what was
            # journaled; if the flusher failed, the states in memory are the
            # best there is (the next start replays the journal).
            self._journal.drain()
            if self._journal.failure is not None:
                return failure
        try:
            with self._db_lock:
                self._states = self._load_states()
        except Exception:  # the disk may refuse reads too: the probe reloads them later
            log.warning("bookie storage: reading the ledger states back failed", exc_info=True)
        return failure

    def _recovered(self) -> bool:
        """Probe a failed store (rate-limited); True once it takes writes again."""
        now = time.monotonic()
        if now - self._last_probe < PROBE_INTERVAL_S:
            return False
        self._last_probe = now
        probe = WriteBatch(raw_mode=True)
        probe.put(PROBE_KEY, b"")
        probe.delete(PROBE_KEY)
        try:
            self._db.write(probe, self._write_options)
            if self._journal is not None:
                self._journal.rotate()  # the failed write left its file in doubt
        except Exception:
            if self._journal is not None:  # its flusher holds this RocksDB: no reopen
                return False
            try:
                # A failed write may leave RocksDB read-only until it is reopened.
                with self._db_lock:
                    self._db.close()
                    self._db = self._open_kv(self._config.data_dir, self._options)
                self._db.write(probe, self._write_options)
            except Exception as error:
                log.debug("bookie storage still refuses writes: %s", error)
                return False
        try:
            with self._db_lock:
                self._states = self._load_states()
        except Exception as error:
            log.debug("bookie storage still refuses reads: %s", error)
            return False
        log.warning("bookie storage at %s takes writes again (it failed with: %s)",
                    self._config.data_dir, self._failure)
        self._failure = None
        observe_storage_recovered()
        return True

    def _commit(self, ops: list[Op]) -> None:
        journal = self._journal
        if journal is not None and journal.failure is not None:
            for op in ops:
                op.done(journal.failure)
            return
        if self._failure is not None and not self._recovered():
            for op in ops:
                op.done(self._failure)
            return
        batch = _Batch()
        oldest = next((op.queued_at for op in ops if isinstance(op, AddOp)), None)
        if oldest is not None:
            metrics.observe_journal_wait(time.perf_counter() - oldest)
        for op in ops:
            if isinstance(op, ProbeOp):
                batch.replies.append((op.done, None))
            elif isinstance(op, AddOp):
                self._apply_add(op, batch)
            elif isinstance(op, FenceOp):
                if op.ledger_id in self._deleted:
                    batch.replies.append((op.done, deleted_error(op.ledger_id)))
                    continue
                state = self._states.get(op.ledger_id)
                if state is None:
                    state = self._states[op.ledger_id] = LedgerState()
                state.fenced = True
                batch.dirty.add(op.ledger_id)
                if journal is not None:
                    batch.records += frame(encode_ledger_op(FENCE, op.ledger_id))
                # The tail as of the fence's place in the queue: recovery adds
                # queued after it in the same batch must not be counted.
                batch.replies.append((op.done, state.tail()))
            else:
                self._apply_delete(op, batch)
        try:
            states = [(state_key(ledger_id), pack_state(state)) for ledger_id in batch.dirty
                      if (state := self._states.get(ledger_id)) is not None]
            if journal is not None:
                if batch.records:
                    seconds = journal.commit(batch.records, batch.changes, states,
                                             batch.data_bytes)
                    metrics.observe_group_commit(batch.entries, batch.data_bytes,
                                                 seconds if self._synced else None)
            else:
                for key, value in states:
                    batch.write.put(key, value)
            if journal is None and not batch.write.is_empty():
                started = time.perf_counter()
                self._db.write(batch.write, self._write_options)
                metrics.observe_group_commit(
                    batch.entries, batch.data_bytes,
                    time.perf_counter() - started if self._synced else None)
        except Exception as error:  # rocksdict raises plain Exception on I/O errors
            log.error("bookie storage write failed (%s); refusing writes until a probe "
                      "succeeds", error)
            failure = self._failed(f"bookie storage at {self._config.data_dir} failed to "
                                   f"write: {error}")
            complete((done, failure) for done, _ in batch.replies)
            return
        # One hand-over per event loop for the whole group commit (ledger.bookie.replies).
        complete(batch.replies)

    def _apply_add(self, op: AddOp, batch: _Batch) -> None:
        request = op.request
        ledger_id = request.ledger_id
        if ledger_id in self._deleted:  # recovery adds too: the ledger is gone
            batch.replies.append((op.done, deleted_error(ledger_id)))
            return
        state = self._states.get(ledger_id)
        if state is None:
            state = self._states[ledger_id] = LedgerState()
        elif state.fenced and not request.recovery:
            batch.replies.append(
                (op.done, LedgerFencedError(f"ledger {ledger_id} is fenced", ledger_id=ledger_id))
            )
            return
        last = request.entry_ids[-1]
        state.last_entry_id = max(state.last_entry_id, last)
        state.last_add_confirmed = max(state.last_add_confirmed, request.last_add_confirmed)
        batch.dirty.add(ledger_id)
        batch.replies.append((op.done, None))
        if self._journal is not None:
            # The flusher puts the entries into RocksDB, off this thread's path.
            batch.records += frame(encode_add(
                ledger_id, request.last_add_confirmed, request.entry_ids, request.lengths,
                request.datas))
            batch.changes.append(request)
        else:
            put_entries(batch.write, request)
        batch.entries += len(request.datas)
        batch.data_bytes += op_bytes(op)

    def _apply_delete(self, op: DeleteOp, batch: _Batch) -> None:
        # Refused from now on, even if this write fails: an id is never reused.
        self._deleted.add(op.ledger_id)
        self._states.pop(op.ledger_id, None)
        batch.dirty.discard(op.ledger_id)
        batch.replies.append((op.done, None))
        if self._journal is not None:
            batch.records += frame(encode_ledger_op(DELETE, op.ledger_id))
            batch.changes.append(op.ledger_id)
        else:
            delete_ledger(batch.write, op.ledger_id)

    # ----------------------------------------------------------------- reads

    def read(self, ledger_id: int, first_entry_id: int, last_entry_id: int,
             max_bytes: int) -> ReadResult:
        """Entries held in ``[first_entry_id, last_entry_id]``: at least one if any, ~max_bytes."""
        state = self._states.get(ledger_id)
        if state is None:
            raise NoSuchLedgerError(f"this bookie holds no ledger {ledger_id}", ledger_id=ledger_id)
        if first_entry_id < 0 or last_entry_id < first_entry_id:
            raise InvalidArgumentError(
                f"bad entry range [{first_entry_id}, {last_entry_id}]", ledger_id=ledger_id
            )
        prefix = entry_key_prefix(ledger_id)
        end = prefix + last_entry_id.to_bytes(8, "big")
        budget = max_bytes if max_bytes > 0 else self._config.read_max_bytes
        if self._journal is None:
            with self._db_lock:
                return self._read_locked(state, prefix, first_entry_id, end, budget)
        # The write cache first, RocksDB second: an entry leaves the cache only
        # after it is in RocksDB, so an acknowledged entry is in one of them.
        cached = self._journal.cached(ledger_id, first_entry_id, last_entry_id)
        with self._db_lock:
            stored = self._read_locked(state, prefix, first_entry_id, end, budget)
        if not cached:
            return stored
        return _merge(stored, cached, last_entry_id, budget)

    def _read_locked(self, state: LedgerState, prefix: bytes, first_entry_id: int, end: bytes,
                     budget: int) -> ReadResult:
        entry_ids: list[int] = []
        lengths: list[int] = []
        datas: list[bytes] = []
        try:
            iterator = self._db.iter()
        except Exception as error:  # closed or broken by a failure
            raise StorageError(f"bookie storage at {self._config.data_dir} cannot be read: "
                               f"{error}") from error
        try:
            iterator.seek(prefix + first_entry_id.to_bytes(8, "big"))
            while iterator.valid():
                key: bytes = iterator.key()
                if key > end:
                    break
                value: bytes = iterator.value()
                entry_ids.append(int.from_bytes(key[9:], "big"))
                lengths.append(LENGTH.unpack_from(value)[0])
                datas.append(value[8:])
                budget -= len(value) - 8
                if budget <= 0:
                    break
                iterator.next()
        finally:
            del iterator
        return ReadResult(entry_ids, lengths, datas, state.last_add_confirmed,
                          state.last_entry_id)

    # ------------------------------------------------------------- lifecycle

    def close(self) -> None:
        """Finish queued changes, stop the writer and close RocksDB. Idempotent."""
        with self._lifecycle:
            if self._closed:
                return
            self._closed = True
            self._queue.put(None)
        self._writer.join()
        if self._journal is not None:
            self._journal.close()
        self._db.close()


def _merge(stored: ReadResult, cached: list[tuple[int, int, bytes]], last_entry_id: int,
           budget: int) -> ReadResult:
    """RocksDB's entries and the write cache's, by entry id (the cache's are as new or newer)."""
    # RocksDB's reply stopped at its budget: cached entries past it come next time.
    limit = last_entry_id if sum(map(len, stored.datas)) < budget else stored.entry_ids[-1]
    merged = {entry_id: (length, data) for entry_id, length, data in
              zip(stored.entry_ids, stored.lengths, stored.datas, strict=True)}
    for entry_id, length, data in cached:
        if entry_id <= limit:
            merged[entry_id] = (length, data)
    entry_ids: list[int] = []
    lengths: list[int] = []
    datas: list[bytes] = []
    for entry_id in sorted(merged):
        length, data = merged[entry_id]
        entry_ids.append(entry_id)
        lengths.append(length)
        datas.append(data)
        budget -= len(data)
        if budget <= 0:
            break
    return ReadResult(entry_ids, lengths, datas, stored.last_add_confirmed,
                      stored.last_entry_id)
