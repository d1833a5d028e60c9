"""Rollover: a new ledger once the open one is too big or too old; the periodic tick.

Appends wait while the old ledger drains; the new ledger is recorded by CAS,
then the old one closed. A crash after the CAS and before the close is
harmless: ledgers other than the writer's are opened with recovery, which
closes them.
"""

from __future__ import annotations

import logging
import time

from broker.errors import BrokerError
from broker.metrics import observe_txn_buffer_snapshot
from broker.segments._core import SegmentCore
from ledger.errors import LedgerError

__all__ = ["SegmentRollover"]

log = logging.getLogger(__name__)


class SegmentRollover(SegmentCore):
    """Rolling the open ledger over, and ``tick`` (a part of ``LedgerSegment``)."""

    def _should_roll(self, now_ms: int) -> bool:
        if self._life.sealed or not self._chain.spans or not self._chain.spans[-1].writing:
            return False
        span = self._chain.spans[-1]
        if span.submitted_bytes == 0:
            return False
        if span.submitted_bytes >= self._config.ledger_rollover_bytes:
            return True
        return now_ms - span.created_ms >= self._config.ledger_rollover_ms

    async def tick(self, now_ms: int) -> None:
        """Periodic work: forget idle writers; roll the ledger over if too old or too big."""
        if not self.usable:
            return
        self._pipeline.expire_writers(now_ms)
        if not self._rollover.switching and self._should_roll(now_ms):
            await self._roll_over()
        if self._buffer is not None:
            try:
                started = time.perf_counter()
                if await self._buffer.maybe_snapshot():
                    observe_txn_buffer_snapshot(time.perf_counter() - started)
            except (BrokerError, LedgerError) as error:
                log.warning("segment %s: transaction buffer snapshot failed: %s",
                            self._name, error)

    async def roll_over(self) -> int:
        """Start a new ledger now unless the open one is empty; its first offset.

        Every append submitted after this returns lands at or after that offset.
        """
        self._life.check_appendable(self.end_offset)
        async with self._chain.lock:
            self._life.check_appendable(self.end_offset)
            if self._chain.spans[-1].submitted_bytes:
                await self._roll_over_locked()
            return self._chain.spans[-1].first_offset

    async def _roll_over(self) -> None:
        async with self._chain.lock:
            if self.usable and self._should_roll(self._now_ms()):
                await self._roll_over_locked()

    async def _roll_over_locked(self) -> None:
        with self._rollover.switch():  # appends queue until it is done
            await self._pipeline.drain()
            old = self._chain.spans[-1]
            old_handle = old.handle
            if old_handle is None:  # pragma: no cover - the open span always has its writer
                raise RuntimeError(f"segment {self._name} has no writer")
            old.writing = False
            old.length_bytes = old_handle.length
            try:
                await self._start_ledger(replacing=[])
            except BaseException:
                old.writing = True
                old.length_bytes = -1
                raise
            log.info("segment %s rolled over from ledger %d to %d at offset %d", self._name,
                     old.ledger_id, self._chain.spans[-1].ledger_id, self.end_offset)
            try:
                await old_handle.close()
            except LedgerError as error:
                log.warning("segment %s: closing ledger %d failed: %s", self._name,
                            old.ledger_id, error)
