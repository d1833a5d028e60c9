"""LedgerHandle: the one writer of a ledger, and readers of it.

**Adds are pipelined.** ``add_async`` only queues the entry and returns a
future; every entry queued in one turn of the event loop goes out as one
request per bookie (one ``AddRequest`` each), and each bookie group-commits
what arrives together. A run of entries is confirmed once every entry of it
has Qa acknowledgements in its write set; runs are confirmed strictly in entry
order, advancing the last add confirmed (LAC), and their futures resolve with
their entry ids in that order. Python work is per run, except one future per
entry and the bookies' per-entry puts.

**Failures.** A bookie that fails an add (unreachable, deadline, storage) is
replaced: the ensemble changes from LAC + 1 by a compare-and-set of the ledger
metadata, and every unconfirmed run is sent to the replacement; acks already
received from the other bookies still count. A fenced bookie means the ledger
was recovered by someone else: every pending and later add fails with
``LedgerFencedError`` and the handle can no longer close the ledger. If an add
fails for good, every later add fails too (a ledger has no holes). Auto-recovery
may swap bookies of closed fragments meanwhile: metadata writes redo their change
on top of that (``metadata_rebase``), and reads retry on the latest metadata.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine, Sequence
from typing import Any

from ledger import metrics
from ledger.api import NO_ENTRY, AddRequest, BookieClient, LedgerState
from ledger.client.add_queue import AddQueue, AddRun
from ledger.client.confirmations import AddConfirmations
from ledger.client.entry_reads import no_replacement_error
from ledger.client.handle_metadata import HandleMetadata
from ledger.client.handle_reads import HandleReads
from ledger.client.session import LedgerSession
from ledger.client.write_sets import entries_for_position
from ledger.errors import (
    BadVersionError,
    BookieUnavailableError,
    EntryTooLargeError,
    InvalidArgumentError,
    LedgerClosedError,
    LedgerError,
    LedgerFencedError,
)
from ledger.metadata.ledger_metadata import LedgerMetadata

__all__ = ["LedgerHandle"]

log = logging.getLogger(__name__)


class LedgerHandle:
    """A ledger open for writing (by its creator) or for reading.

    Obtain one from ``LedgerClient.create`` or ``LedgerClient.open``; do not
    construct it directly. It holds parts that own their state: the metadata
    and its compare-and-set (``HandleMetadata``), the entries queued this turn
    (``AddQueue``), the runs awaiting their quorum with the LAC
    (``AddConfirmations``) and the reads (``HandleReads``); the handle keeps
    the ensemble, its changes and the writer's failure.
    """

    def __init__(
        self, client: LedgerSession, metadata: LedgerMetadata, version: int, *, writable: bool,
        last_add_confirmed: int = NO_ENTRY,
    ) -> None:
        self._client = client
        self._config = client.config
        self._record = HandleMetadata(client, metadata, version)
        self._writable = writable
        self._ledger_id = metadata.ledger_id
        self._ensemble_size = metadata.ensemble_size
        self._write_quorum = metadata.write_quorum
        self._ensemble: list[BookieClient] = [
            client.bookie(bookie_id) for bookie_id in metadata.ensembles[-1][1]
        ]
        # Writer state.
        self._queue = AddQueue(metadata.last_entry_id + 1 if not writable else 0)
        self._acks = AddConfirmations(
            metadata.ensemble_size, metadata.write_quorum, metadata.ack_quorum,
            last_add_confirmed=last_add_confirmed, confirmed_length=metadata.length)
        self._failure: LedgerError | None = None
        self._closing = False
        self._changing_ensemble = False
        self._failed_positions: set[int] = set()
        self._bookie_errors: dict[int, LedgerError] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._reads = HandleReads(client, self._record)

    # ------------------------------------------------------------ properties

    @property
    def ledger_id(self) -> int:
        """The ledger's id."""
        return self._ledger_id

    @property
    def last_add_confirmed(self) -> int:
        """The greatest entry id confirmed (writer) or known confirmed (reader); -1 if none."""
        return self._acks.last_add_confirmed

    @property
    def metadata(self) -> LedgerMetadata:
        """The ledger metadata as this handle last wrote or read it."""
        return self._record.current

    @property
    def is_closed(self) -> bool:
        """Whether the ledger is closed in the metadata this handle holds."""
        return self._record.current.state is LedgerState.CLOSED

    @property
    def length(self) -> int:
        """Bytes confirmed so far (writer) or the closed length (reader)."""
        return self._acks.confirmed_length

    # ------------------------------------------------------------------ adds

    def add_async(self, data: bytes) -> asyncio.Future[int]:
        """Queue an entry; the future resolves with its entry id once Qa bookies hold it.

        Raises (immediately) ``EntryTooLargeError``, ``LedgerClosedError`` after
        ``close``, ``InvalidArgumentError`` on a read-only handle, and the
        handle's failure (e.g. ``LedgerFencedError``) once an add has failed.
        """
        if self._failure is not None:
            raise self._failure
        if self._closing or self._record.current.state is LedgerState.CLOSED:
            raise LedgerClosedError(
                f"ledger {self._ledger_id} is closed", ledger_id=self._ledger_id
            )
        if not self._writable:
            raise InvalidArgumentError(
                f"ledger {self._ledger_id} is open read-only", ledger_id=self._ledger_id
            )
        size = len(data)
        if size > self._config.max_entry_bytes:
            raise EntryTooLargeError(size, self._config.max_entry_bytes, ledger_id=self._ledger_id)
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        if self._queue.put(data, future) >= self._config.max_add_request_bytes:
            self._flush()
        elif self._queue.schedule():
            asyncio.get_running_loop().call_soon(self._flush)
        return future

    async def add(self, data: bytes) -> int:
        """Add an entry and wait until it is confirmed; returns its entry id."""
        return await self.add_async(data)

    def _flush(self) -> None:
        run = self._queue.take()
        if run is None:
            return
        self._acks.hold(run)
        if self._failure is not None:
            self._fail_pending(self._failure)
        elif not self._changing_ensemble:
            self._send(run, range(self._ensemble_size))

    def _send(self, run: AddRun, positions: Sequence[int]) -> None:
        run.sent = True
        count = len(run.datas)
        lac = self._acks.last_add_confirmed
        for position in positions:
            indices = entries_for_position(
                position, run.first_entry_id, count, self._ensemble_size, self._write_quorum
            )
            if not indices:
                run.acked.add(position)
                continue
            if len(indices) == count:
                request = AddRequest(
                    self._ledger_id, range(run.first_entry_id, run.first_entry_id + count),
                    run.lengths, run.datas, lac,
                )
            else:
                request = AddRequest(
                    self._ledger_id, [run.first_entry_id + i for i in indices],
                    [run.lengths[i] for i in indices], [run.datas[i] for i in indices], lac,
                )
            self._spawn(self._add_to(position, self._ensemble[position], run, request))

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _add_to(
        self, position: int, bookie: BookieClient, run: AddRun, request: AddRequest
    ) -> None:
        started = time.perf_counter()
        try:
            await bookie.add_entries(request)
        except LedgerFencedError as error:
            self._fail(error)
            return
        except LedgerError as error:
            if error.retriable:
                self._bookie_failed(position, bookie, error)
            else:
                self._fail(error)
            return
        except Exception as error:  # a bug, not a bookie failure: fail loudly
            log.error("unexpected error adding to %s", bookie.bookie_id, exc_info=True)
            self._fail(LedgerError(f"add failed: {error!r}", ledger_id=self._ledger_id))
            return
        metrics.observe_add(time.perf_counter() - started)
        if self._ensemble[position] is not bookie:
            return  # answered after it was replaced; the replacement's ack counts instead
        run.acked.add(position)
        self._acks.confirm()

    def _fail(self, error: LedgerError) -> None:
        if self._failure is None:
            if isinstance(error, LedgerFencedError):
                log.info("ledger %d was fenced; its writer stops", self._ledger_id)
            else:
                log.warning("ledger %d writer failed: %s", self._ledger_id, error)
            self._failure = error
        self._fail_pending(self._failure)

    def _fail_pending(self, error: LedgerError) -> None:
        self._acks.fail(error)
        self._queue.fail(error)
        self._acks.signal_drained()

    # ------------------------------------------------------- ensemble change

    def replace_departed(self, bookie_id: str) -> None:
        """``bookie_id`` left the cluster: replace it in the open ensemble now, as after a
        failed add, rather than on the next add to it (an idle writer may make none)."""
        current = {bookie.bookie_id for bookie in self._ensemble}
        if not self._writable or self._closing or bookie_id not in current \
                or not self._client.directory.choose(1, exclude=current):
            return  # with no bookie to take its place, the writer waits as before
        for position, bookie in enumerate(self._ensemble):
            if bookie.bookie_id == bookie_id:
                self._bookie_failed(position, bookie, BookieUnavailableError(
                    f"bookie {bookie_id} left the cluster", ledger_id=self._ledger_id))

    def _bookie_failed(self, position: int, bookie: BookieClient, error: LedgerError) -> None:
        if self._failure is not None or self._ensemble[position] is not bookie:
            return
        log.warning(
            "bookie %s failed an add to ledger %d (%s); replacing it",
            bookie.bookie_id, self._ledger_id, error,
        )
        self._client.directory.mark_failed(bookie.bookie_id)
        self._failed_positions.add(position)
        self._bookie_errors[position] = error
        if not self._changing_ensemble:
            self._changing_ensemble = True
            self._spawn(self._change_ensemble())

    async def _change_ensemble(self) -> None:
        try:
            while self._failed_positions and self._failure is None:
                positions = sorted(self._failed_positions)
                self._failed_positions.clear()
                await self._replace(positions)
        except LedgerError as error:
            self._fail(error)
        finally:
            self._changing_ensemble = False
            self._acks.signal_drained()

    async def _replace(self, positions: list[int]) -> None:
        current = [bookie.bookie_id for bookie in self._ensemble]
        replacements = self._client.directory.choose(len(positions), exclude=set(current))
        if len(replacements) < len(positions):
            raise no_replacement_error(self._ledger_id, current, positions, self._bookie_errors)
        new_ids = list(current)
        for position, bookie_id in zip(positions, replacements, strict=True):
            new_ids[position] = bookie_id
        first_entry_id = self._acks.last_add_confirmed + 1
        try:
            await self._record.write(
                lambda base: base.with_ensemble_change(first_entry_id, tuple(new_ids)))
        except BadVersionError:
            latest, _ = await self._record.latest()
            raise LedgerFencedError(
                f"ledger {self._ledger_id} changed under its writer (now {latest.state.value})",
                ledger_id=self._ledger_id,
            ) from None
        log.info(
            "ledger %d ensemble from entry %d: %s", self._ledger_id, first_entry_id, new_ids
        )
        for position in positions:
            self._ensemble[position] = self._client.bookie(new_ids[position])
        for run in self._acks:
            if run.sent:
                run.acked.difference_update(positions)
                self._send(run, positions)
            else:
                self._send(run, range(self._ensemble_size))
        self._acks.confirm()

    # ----------------------------------------------------------------- close

    async def close(self) -> None:
        """Wait for every queued add, then close the ledger at its LAC. Idempotent.

        Raises ``LedgerFencedError`` if the ledger was recovered by someone else
        (its end was then decided by the recovery), or the failure that stopped
        the writer.
        """
        if not self._writable or self._record.current.state is LedgerState.CLOSED:
            return
        self._closing = True
        self._flush()
        while (self._acks or self._changing_ensemble) and self._failure is None:
            await self._acks.drained()
        if self._failure is not None:
            raise self._failure
        lac, length = self._acks.last_add_confirmed, self._acks.confirmed_length
        try:
            await self._record.write(lambda base: base.with_state(
                LedgerState.CLOSED, last_entry_id=lac, length=length))
        except BadVersionError:
            latest, version = await self._record.latest()
            if latest.state is not LedgerState.CLOSED or latest.last_entry_id != lac:
                raise LedgerFencedError(
                    f"ledger {self._ledger_id} was recovered by another client",
                    ledger_id=self._ledger_id,
                ) from None
            self._record.adopt(latest, version)
        self._writable = False
        await self._fence_quietly()

    async def _fence_quietly(self) -> None:
        # Fencing a closed ledger makes any stray add to its bookies fail; it
        # is not needed for safety (the metadata is closed), so errors only log.
        results = await asyncio.gather(
            *(bookie.fence(self._ledger_id) for bookie in self._ensemble), return_exceptions=True
        )
        for bookie, result in zip(self._ensemble, results, strict=True):
            if isinstance(result, Exception):
                log.info("could not fence closed ledger %d on %s: %s",
                         self._ledger_id, bookie.bookie_id, result)

    # ----------------------------------------------------------------- reads

    async def read_last_add_confirmed(self) -> int:
        """Ask the bookies for the ledger's LAC (reader handles); returns and keeps it."""
        if self._writable or self._record.current.state is LedgerState.CLOSED:
            return self._acks.last_add_confirmed
        results = await asyncio.gather(
            *(bookie.read_last_add_confirmed(self._ledger_id) for bookie in self._ensemble),
            return_exceptions=True,
        )
        for result in results:
            if not isinstance(result, BaseException):
                self._acks.learn(result.last_add_confirmed)
        return self._acks.last_add_confirmed

    async def read(self, first_entry_id: int, last_entry_id: int) -> list[bytes]:
        """Entries ``first_entry_id .. last_entry_id`` (inclusive), in order.

        A reader never reads past the LAC (or the closed end): asking for more
        raises ``NoSuchEntryError``. Each entry is read from a bookie of its
        write set, trying the next one when a bookie fails.
        """
        return await self._reads.read(first_entry_id, last_entry_id,
                                      self._acks.last_add_confirmed,
                                      adopt_latest=not self._writable)
