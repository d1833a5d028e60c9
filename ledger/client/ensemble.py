"""Ensemble: the bookies a writer adds to now, and their replacement when one fails.

A bookie that fails an add (unreachable, deadline, storage) or leaves the
cluster is replaced: the ensemble changes from LAC + 1 by a compare-and-set of
the ledger metadata (``HandleMetadata``), and every unconfirmed run is sent
again to the replacements (a run not sent yet goes to the whole ensemble);
acknowledgements already received from the other bookies still count. Failures
that arrive while a change is under way join it: one change at a time, in a
task this part owns.

**Crash windows and unknown outcomes.** The metadata write is the only remote
call here. If it fails with an unknown outcome (``MetadataUnavailableError``)
the writer fails: the change may or may not be recorded, and a ledger whose
writer cannot tell which ensemble holds its next entries must stop (its reader
or a recovery reads the metadata back and decides the end). A lost
compare-and-set (``BadVersionError``) means another client (a recovery) took
the ledger: ``LedgerFencedError``. The writer crashing after the write and
before resending leaves a recorded ensemble with no entries from LAC + 1 on:
recovery reads those bookies and finds the end at the LAC.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import NamedTuple

from ledger.api import BookieClient
from ledger.client.add_queue import AddRun
from ledger.client.confirmations import AddConfirmations
from ledger.client.entry_reads import no_replacement_error
from ledger.client.handle_metadata import HandleMetadata
from ledger.client.session import LedgerSession
from ledger.errors import BadVersionError, BookieUnavailableError, LedgerError, LedgerFencedError

__all__ = ["Ensemble", "WriterCalls"]

log = logging.getLogger(__name__)


class WriterCalls(NamedTuple):
    """What a change calls back in its writer, given per call (the part keeps no
    reference to its writer at rest, so a dropped handle is freed at once)."""

    #: Send a run to these positions of the ensemble.
    send: Callable[[AddRun, Sequence[int]], None]
    #: Stop the writer for good with this error.
    fail: Callable[[LedgerError], None]
    #: Whether the writer has stopped.
    failed: Callable[[], bool]


class Ensemble:
    """One writer's ensemble in force; replaces failed bookies by ensemble change."""

    def __init__(self, session: LedgerSession, record: HandleMetadata,
                 acks: AddConfirmations) -> None:
        self._session = session
        self._record = record
        self._acks = acks
        self._bookies: list[BookieClient] = [
            session.bookie(bookie_id) for bookie_id in record.current.ensembles[-1][1]
        ]
        self._failed_positions: set[int] = set()
        self._bookie_errors: dict[int, LedgerError] = {}
        self._change: asyncio.Task[None] | None = None

    @property
    def bookies(self) -> list[BookieClient]:
        """The bookies in force, by ensemble position (the list itself: do not change it)."""
        return self._bookies

    @property
    def changing(self) -> bool:
        """Whether an ensemble change is under way (new runs wait for it)."""
        return self._change is not None

    def replace_departed(self, bookie_id: str, writer: WriterCalls) -> None:
        """``bookie_id`` left the cluster: replace it now, as after a failed add."""
        current = {bookie.bookie_id for bookie in self._bookies}
        if bookie_id not in current or not self._session.directory.choose(1, exclude=current):
            return  # with no bookie to take its place, the writer waits as before
        ledger_id = self._record.current.ledger_id
        for position, bookie in enumerate(self._bookies):
            if bookie.bookie_id == bookie_id:
                self.bookie_failed(position, bookie, BookieUnavailableError(
                    f"bookie {bookie_id} left the cluster", ledger_id=ledger_id), writer)

    def bookie_failed(self, position: int, bookie: BookieClient, error: LedgerError,
                      writer: WriterCalls) -> None:
        """``bookie`` at ``position`` failed an add: replace it (unless already replaced)."""
        if writer.failed() or self._bookies[position] is not bookie:
            return
        log.warning(
            "bookie %s failed an add to ledger %d (%s); replacing it",
            bookie.bookie_id, self._record.current.ledger_id, error,
        )
        self._session.directory.mark_failed(bookie.bookie_id)
        self._failed_positions.add(position)
        self._bookie_errors[position] = error
        if self._change is None:
            self._change = asyncio.ensure_future(self._change_ensemble(writer))

    async def _change_ensemble(self, writer: WriterCalls) -> None:
        try:
            while self._failed_positions and not writer.failed():
                positions = sorted(self._failed_positions)
                self._failed_positions.clear()
                await self._replace(positions, writer.send)
        except LedgerError as error:
            writer.fail(error)
        finally:
            self._change = None
            self._acks.signal_drained()

    async def _replace(self, positions: list[int],
                       send: Callable[[AddRun, Sequence[int]], None]) -> None:
        ledger_id = self._record.current.ledger_id
        current = [bookie.bookie_id for bookie in self._bookies]
        replacements = self._session.directory.choose(len(positions), exclude=set(current))
        if len(replacements) < len(positions):
            raise no_replacement_error(ledger_id, current, positions, self._bookie_errors)
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
                f"ledger {ledger_id} changed under its writer (now {latest.state.value})",
                ledger_id=ledger_id,
            ) from None
        log.info("ledger %d ensemble from entry %d: %s", ledger_id, first_entry_id, new_ids)
        for position in positions:
            self._bookies[position] = self._session.bookie(new_ids[position])
        for run in self._acks:
            if run.sent:
                run.acked.difference_update(positions)
                send(run, positions)
            else:
                send(run, range(len(self._bookies)))
        self._acks.confirm()
