"""One bookie's store on RocksDB: entries, per-ledger state, and group commit.

Keys are big-endian so a ledger's entries are contiguous and iterate in order:

* entry:  ``0x01 | ledger_id (8) | entry_id (8)`` -> ``length (8) | data``
* state:  ``0x02 | ledger_id (8)`` -> ``version (1) | fenced (1) | lac (8) | last_entry_id (8)``

**Group commit.** Every change (add, fence, delete) is an operation queued to
one writer thread, which drains the queue, applies everything it found in one
RocksDB ``WriteBatch`` written once (with fsync under ``sync`` durability), and
only then completes the operations. rocksdict keeps the GIL through the write
and its fsync, so the whole process stalls for each one: few, large batches
from one thread is the only way to be fast.

**Ordering.** Operations are applied in queue order by that one thread, so a
fence answers only after every add queued before it is durable, and refuses
every add queued after it. This is what makes fencing safe: a recovery that
has fenced a bookie has seen every entry the bookie will ever acknowledge to
the old writer.

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
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from rocksdict import Options, Rdict, WriteBatch, WriteOptions

from ledger import metrics
from ledger.api import NO_ENTRY, AddRequest, LedgerTail, ReadResult
from ledger.config import BookieConfig, Durability
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

_ENTRY: Final = b"\x01"
_STATE: Final = b"\x02"
_STATE_FORMAT: Final = struct.Struct(">BBqq")
_STATE_VERSION: Final = 1
_LENGTH: Final = struct.Struct(">Q")

Done = Callable[[object], None]
"""Completion callback: receives the operation's result or a ``LedgerError``."""


@dataclass(slots=True)
class _LedgerState:
    fenced: bool = False
    last_add_confirmed: int = NO_ENTRY
    last_entry_id: int = NO_ENTRY

    def tail(self) -> LedgerTail:
        return LedgerTail(self.last_add_confirmed, self.last_entry_id, self.fenced)


@dataclass(slots=True)
class AddOp:
    """Store ``request``; completes with ``None``."""

    request: AddRequest
    done: Done


@dataclass(slots=True)
class FenceOp:
    """Fence a ledger; completes with its ``LedgerTail``."""

    ledger_id: int
    done: Done


@dataclass(slots=True)
class DeleteOp:
    """Delete a ledger; completes with ``None``."""

    ledger_id: int
    done: Done


@dataclass(slots=True)
class ProbeOp:
    """Probe a failed store (see Failure above); completes with ``None`` or ``StorageError``."""

    done: Done


_Op = AddOp | FenceOp | DeleteOp | ProbeOp

#: A failed store probes no more often than this.
PROBE_INTERVAL_S: Final = 0.5
_PROBE_KEY: Final = b"\x03probe"


def _op_bytes(op: _Op) -> int:
    """Payload bytes of an operation, from the cumulative lengths (no per-entry work)."""
    if isinstance(op, AddOp):
        request = op.request
        return request.lengths[-1] - request.lengths[0] + len(request.datas[0])
    return 0


def _ledger_prefix(ledger_id: int) -> bytes:
    return _ENTRY + ledger_id.to_bytes(8, "big")


def _state_key(ledger_id: int) -> bytes:
    return _STATE + ledger_id.to_bytes(8, "big")


@dataclass
class _Batch:
    """What one group commit writes and whom it answers."""

    write: WriteBatch = field(default_factory=lambda: WriteBatch(raw_mode=True))
    dirty: set[int] = field(default_factory=set)
    replies: list[tuple[Done, object]] = field(default_factory=list)
    # Entries and their bytes in this batch (for ``ledger.metrics``).
    entries: int = 0
    data_bytes: int = 0


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
        self._states: dict[int, _LedgerState] = self._load_states()
        self._queue: queue.SimpleQueue[_Op | None] = queue.SimpleQueue()
        self._failure: LedgerError | None = None
        self._closed = False
        self._lifecycle = threading.Lock()
        self._writer = threading.Thread(target=self._run, name="bookie-writer", daemon=True)
        self._writer.start()

    # ----------------------------------------------------------------- state

    def _load_states(self) -> dict[int, _LedgerState]:
        states: dict[int, _LedgerState] = {}
        # A live rocksdict iterator keeps the database locked after close(),
        # so every iterator is dropped in a finally block.
        iterator = self._db.iter()
        try:
            iterator.seek(_STATE)
            while iterator.valid():
                key: bytes = iterator.key()
                if not key.startswith(_STATE):
                    break
                version, fenced, lac, last = _STATE_FORMAT.unpack(iterator.value())
                if version != _STATE_VERSION:
                    raise StorageError(f"ledger state format {version} is unknown")
                states[int.from_bytes(key[1:], "big")] = _LedgerState(bool(fenced), lac, last)
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

    def submit(self, op: _Op) -> None:
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
            ops: list[_Op] = [first]
            size = _op_bytes(first)
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
                    size += _op_bytes(op)
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
        probe.put(_PROBE_KEY, b"")
        probe.delete(_PROBE_KEY)
        try:
            self._db.write(probe, self._write_options)
        except Exception:
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

    def _commit(self, ops: list[_Op]) -> None:
        if self._failure is not None and not self._recovered():
            for op in ops:
                op.done(self._failure)
            return
        batch = _Batch()
        for op in ops:
            if isinstance(op, ProbeOp):
                batch.replies.append((op.done, None))
            elif isinstance(op, AddOp):
                self._apply_add(op, batch)
            elif isinstance(op, FenceOp):
                state = self._states.get(op.ledger_id)
                if state is None:
                    state = self._states[op.ledger_id] = _LedgerState()
                state.fenced = True
                batch.dirty.add(op.ledger_id)
                # The tail as of the fence's place in the queue: recovery adds
                # queued after it in the same batch must not be counted.
                batch.replies.append((op.done, state.tail()))
            else:
                self._apply_delete(op, batch)
        try:
            for ledger_id in batch.dirty:
                state = self._states.get(ledger_id)
                if state is not None:
                    batch.write.put(
                        _state_key(ledger_id),
                        _STATE_FORMAT.pack(
                            _STATE_VERSION, state.fenced, state.last_add_confirmed,
                            state.last_entry_id,
                        ),
                    )
            if not batch.write.is_empty():
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
            for done, _ in batch.replies:
                done(failure)
            return
        for done, result in batch.replies:
            done(result)

    def _apply_add(self, op: AddOp, batch: _Batch) -> None:
        request = op.request
        ledger_id = request.ledger_id
        state = self._states.get(ledger_id)
        if state is None:
            state = self._states[ledger_id] = _LedgerState()
        elif state.fenced and not request.recovery:
            batch.replies.append(
                (op.done, LedgerFencedError(f"ledger {ledger_id} is fenced", ledger_id=ledger_id))
            )
            return
        prefix = _ledger_prefix(ledger_id)
        put = batch.write.put
        pack = _LENGTH.pack
        for entry_id, length, data in zip(
            request.entry_ids, request.lengths, request.datas, strict=True
        ):
            put(prefix + entry_id.to_bytes(8, "big"), pack(length) + data)
        last = request.entry_ids[-1]
        state.last_entry_id = max(state.last_entry_id, last)
        state.last_add_confirmed = max(state.last_add_confirmed, request.last_add_confirmed)
        batch.dirty.add(ledger_id)
        batch.replies.append((op.done, None))
        batch.entries += len(request.datas)
        batch.data_bytes += _op_bytes(op)

    def _apply_delete(self, op: DeleteOp, batch: _Batch) -> None:
        prefix = _ledger_prefix(op.ledger_id)
        batch.write.delete_range(prefix, _ledger_prefix(op.ledger_id + 1))
        batch.write.delete(_state_key(op.ledger_id))
        self._states.pop(op.ledger_id, None)
        batch.dirty.discard(op.ledger_id)
        batch.replies.append((op.done, None))

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
        prefix = _ledger_prefix(ledger_id)
        end = prefix + last_entry_id.to_bytes(8, "big")
        budget = max_bytes if max_bytes > 0 else self._config.read_max_bytes
        with self._db_lock:
            return self._read_locked(state, prefix, first_entry_id, end, budget)

    def _read_locked(self, state: _LedgerState, prefix: bytes, first_entry_id: int, end: bytes,
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
                lengths.append(_LENGTH.unpack_from(value)[0])
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
        self._db.close()
