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
from ledger.client.ensemble import Ensemble, WriterCalls
from ledger.client.handle_metadata import HandleMetadata
from ledger.client.handle_reads import HandleReads
from ledger.client.session import LedgerSession
from ledger.client.write_sets import entries_for_position
from ledger.errors import (
    BadVersionError,
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
    (``AddConfirmations``), the ensemble and its changes (``Ensemble``) and the
    reads (``HandleReads``); the handle keeps the writer's failure and close.
    """

    def __init__(
        self, client: LedgerSession, metadata: LedgerMetadata, version: int, *, writable: bool,
        last_add_confirmed: int = NO_ENTRY,
    ) -> None:
        self._config = client.config
        self._record = HandleMetadata(client, metadata, version)
        self._writable = writable
        self._ledger_id = metadata.ledger_id
        self._ensemble_size = metadata.ensemble_size
        self._write_quorum = metadata.write_quorum
        # Writer state.
        self._queue = AddQueue(metadata.last_entry_id + 1 if not writable else 0)
        self._acks = AddConfirmations(
            metadata.ensemble_size, metadata.write_quorum, metadata.ack_quorum,
            last_add_confirmed=last_add_confirmed, confirmed_length=metadata.length)
        self._ensemble = Ensemble(client, self._record, self._acks)
        self._failure: LedgerError | None = None
        self._closing = False
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
        elif not self._ensemble.changing:
            self._send(run, range(self._ensemble_size))

    def _send(self, run: AddRun, positions: Sequence[int]) -> None:
        run.sent = True
        count = len(run.datas)
        lac, bookies = self._acks.last_add_confirmed, self._ensemble.bookies
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
            self._spawn(self._add_to(position, bookies[position], run, request))

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
                self._ensemble.bookie_failed(position, bookie, error, self._writer_calls())
            else:
                self._fail(error)
            return
        except Exception as error:  # a bug, not a bookie failure: fail loudly
            log.error("unexpected error adding to %s", bookie.bookie_id, exc_info=True)
            self._fail(LedgerError(f"add failed: {error!r}", ledger_id=self._ledger_id))
            return
        metrics.observe_add(time.perf_counter() - started)
        if self._ensemble.bookies[position] is not bookie:
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
        if self._writable and not self._closing:
            self._ensemble.replace_departed(bookie_id, self._writer_calls())

    def _writer_calls(self) -> WriterCalls:
        # Made per call: the ensemble holds none at rest (no cycle keeps a dropped
        # handle alive, in the client's and the metrics' weak sets).
        return WriterCalls(self._send, self._fail, lambda: self._failure is not None)

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
        while (self._acks or self._ensemble.changing) and self._failure is None:
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
            *(bookie.fence(self._ledger_id) for bookie in self._ensemble.bookies),
            return_exceptions=True,
        )
        for bookie, result in zip(self._ensemble.bookies, results, strict=True):
            if isinstance(result, Exception):
                log.info("could not fence closed ledger %d on %s: %s",
                         self._ledger_id, bookie.bookie_id, result)

    # ----------------------------------------------------------------- reads

    async def read_last_add_confirmed(self) -> int:
        """Ask the bookies for the ledger's LAC (reader handles); returns and keeps it."""
        if self._writable or self._record.current.state is LedgerState.CLOSED:
            return self._acks.last_add_confirmed
        results = await asyncio.gather(
            *(bookie.read_last_add_confirmed(self._ledger_id)
              for bookie in self._ensemble.bookies),
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
