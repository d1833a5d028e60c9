"""AddConfirmations: the runs sent and not yet confirmed, and the last add confirmed.

A run is confirmed once every entry of it has Qa acknowledgements in its write
set (``write_sets.is_quorum_acked``), strictly in entry order: the first run
not yet confirmed holds back every later one, so the LAC never passes a hole.
Confirming resolves the run's futures with their entry ids in order.

A failure fails every run held (the ledger has no holes: nothing after a failed
entry may be confirmed). A close waits until no run is held (``drained``).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Iterator

from ledger.api import NO_ENTRY
from ledger.client.add_queue import AddRun
from ledger.client.write_sets import is_quorum_acked
from ledger.errors import LedgerError

__all__ = ["AddConfirmations"]


class AddConfirmations:
    """Runs awaiting their quorum in entry order; the LAC and the confirmed length."""

    def __init__(self, ensemble_size: int, write_quorum: int, ack_quorum: int, *,
                 last_add_confirmed: int = NO_ENTRY, confirmed_length: int = 0) -> None:
        self._ensemble_size = ensemble_size
        self._write_quorum = write_quorum
        self._ack_quorum = ack_quorum
        self._pending: deque[AddRun] = deque()
        self._lac = last_add_confirmed
        self._confirmed_length = confirmed_length
        self._drained: asyncio.Future[None] | None = None

    @property
    def last_add_confirmed(self) -> int:
        """The greatest entry id confirmed (or learnt confirmed); -1 if none."""
        return self._lac

    @property
    def confirmed_length(self) -> int:
        """The ledger's length in bytes up to the LAC."""
        return self._confirmed_length

    def __bool__(self) -> bool:
        """Whether any run is held (sent or not, unconfirmed)."""
        return bool(self._pending)

    def __iter__(self) -> Iterator[AddRun]:
        """The runs held, in entry order (a copy: sending may confirm)."""
        return iter(list(self._pending))

    def hold(self, run: AddRun) -> None:
        """Hold ``run`` until it is confirmed or failed."""
        self._pending.append(run)

    def learn(self, last_add_confirmed: int) -> None:
        """A bookie reports ``last_add_confirmed`` (reader handles): keep the greatest."""
        self._lac = max(self._lac, last_add_confirmed)

    def confirm(self) -> None:
        """Confirm the runs at the front that have their quorum, in order."""
        pending = self._pending
        advanced = False
        while pending:
            run = pending[0]
            count = len(run.datas)
            if not run.sent or not is_quorum_acked(
                run.acked, run.first_entry_id, count, self._ensemble_size,
                self._write_quorum, self._ack_quorum,
            ):
                break
            pending.popleft()
            advanced = True
            first = run.first_entry_id
            self._lac = first + count - 1
            self._confirmed_length = run.lengths[-1]
            for index, future in enumerate(run.futures):
                if not future.done():
                    future.set_result(first + index)
        if advanced and not pending:
            self.signal_drained()

    def fail(self, error: LedgerError) -> None:
        """Fail every run held with ``error``."""
        while self._pending:
            for future in self._pending.popleft().futures:
                if not future.done():
                    future.set_exception(error)

    async def drained(self) -> None:
        """Wait for the next ``signal_drained`` (the caller checks what it waits for)."""
        self._drained = asyncio.get_running_loop().create_future()
        await self._drained

    def signal_drained(self) -> None:
        """Wake a ``drained`` waiter: the runs emptied, failed, or the ensemble settled."""
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)
