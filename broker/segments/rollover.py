"""Rollover: a new ledger once the open one is too big or too old; appends kept in order.

``SegmentRollover`` is the part of a ``LedgerSegment`` that decides when the
open ledger is full (``ledger_rollover_bytes`` submitted, or
``ledger_rollover_ms`` old with an entry), switches to a new one, and owns the
``RolloverGate`` that queues the appends that must wait for a switch, in call
order.

Appends wait while the old ledger drains; the new ledger is recorded by CAS,
then the old one closed. A crash after the CAS and before the close is
harmless: ledgers other than the writer's are opened with recovery, which
closes them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

from broker.api import AppendResult, Block, TopicConfig
from broker.errors import BrokerError
from broker.segments.chain import LedgerChain
from broker.segments.entry import EntryKind
from broker.segments.gate import RolloverGate
from broker.segments.life import SegmentLife
from broker.segments.pipeline import AppendPipeline
from broker.segments.recorder import SegmentRecorder
from ledger.errors import LedgerError
from txnbuffer.api import TxnId

__all__ = ["SegmentRollover"]

log = logging.getLogger(__name__)


class SegmentRollover:
    """Rolling the open ledger over, and the appends waiting for it (a part of ``LedgerSegment``).

    Args:
        name: the segment's name, for errors and logs.
        chain: the ledgers (a rollover holds its lock).
        pipeline: drained before a switch; takes the appends that waited.
        life: refuses appends to a segment closing, sealed or failed.
        recorder: starts and records the new ledger.
        config: the topic configuration in force (the rollover limits).
        now_ms: the segment's clock in milliseconds.
    """

    def __init__(self, name: str, chain: LedgerChain, pipeline: AppendPipeline,
                 life: SegmentLife, recorder: SegmentRecorder,
                 config: Callable[[], TopicConfig], now_ms: Callable[[], int]) -> None:
        self._name = name
        self._chain = chain
        self._pipeline = pipeline
        self._life = life
        self._recorder = recorder
        self._config = config
        self._now_ms = now_ms
        # Appends queued, in call order, behind a rollover; the switch under way.
        self._gate = RolloverGate()

    def should_roll(self, now_ms: int) -> bool:
        """The open ledger holds an entry and is too big or too old."""
        spans = self._chain.spans
        if self._life.sealed or not spans or not spans[-1].writing:
            return False
        span = spans[-1]
        if span.submitted_bytes == 0:
            return False
        config = self._config()
        if span.submitted_bytes >= config.ledger_rollover_bytes:
            return True
        return now_ms - span.created_ms >= config.ledger_rollover_ms

    def must_wait(self) -> bool:
        """An append must take its turn (``submit_in_turn``): appends queue, or one is due."""
        return self._gate.busy or self.should_roll(self._now_ms())

    async def tick(self, now_ms: int) -> None:
        """Roll the ledger over if it is too old or too big (none under way)."""
        if not self._gate.switching and self.should_roll(now_ms):
            await self._roll_over()

    async def roll_over(self) -> int:
        """Start a new ledger now unless the open one is empty; its first offset.

        Every append submitted after this returns lands at or after that offset.
        """
        self._life.check_appendable(self._pipeline.end_offset)
        async with self._chain.lock:
            self._life.check_appendable(self._pipeline.end_offset)
            if self._chain.spans[-1].submitted_bytes:
                await self.roll_over_locked()
            return self._chain.spans[-1].first_offset

    async def _roll_over(self) -> None:
        async with self._chain.lock:
            if self._life.usable and self.should_roll(self._now_ms()):
                await self.roll_over_locked()

    async def roll_over_locked(self) -> None:
        """Switch to a new ledger now; the caller holds the chain's lock."""
        with self._gate.switch():  # appends queue until it is done
            await self._pipeline.drain()
            old = self._chain.spans[-1]
            old_handle = old.handle
            if old_handle is None:  # pragma: no cover - the open span always has its writer
                raise RuntimeError(f"segment {self._name} has no writer")
            old.writing = False
            old.length_bytes = old_handle.length
            try:
                await self._recorder.start_ledger(replacing=[])
            except BaseException:
                old.writing = True
                old.length_bytes = -1
                raise
            log.info("segment %s rolled over from ledger %d to %d at offset %d", self._name,
                     old.ledger_id, self._chain.spans[-1].ledger_id, self._pipeline.end_offset)
            try:
                await old_handle.close()
            except LedgerError as error:
                log.warning("segment %s: closing ledger %d failed: %s", self._name,
                            old.ledger_id, error)

    async def submit_in_turn(
        self, blocks: Sequence[Block], writer_id: str, last_event_number: int,
        event_count: int, kind: EntryKind, txn_id: TxnId | None, contiguous: bool,
    ) -> AppendResult | tuple[int, asyncio.Future[int]]:
        """Submit an append after every append queued before it, once the ledger takes it.

        Appends that must wait (for a rollover) wait in call order, and every
        later call queues behind them: a later block overtaking an earlier one
        would take its offset, or make it look a duplicate. A rollover that
        fails fails the appends queued before it. Returns what
        ``AppendPipeline.submit`` returns.
        """
        async with self._gate.turn():
            await self._until_writable()
            self._life.check_appendable(self._pipeline.end_offset)  # closing or sealing
            return self._pipeline.submit(self._chain.spans[-1], blocks, writer_id,
                                         last_event_number, event_count, kind, txn_id,
                                         contiguous)

    async def _until_writable(self) -> None:
        """Wait out (or start) a rollover, until the open ledger takes appends."""
        while True:
            if not await self._gate.wait_switch():
                if not self.should_roll(self._now_ms()):
                    return
                try:
                    await self._roll_over()
                except (BrokerError, LedgerError) as error:
                    self._gate.failed(error)
                    raise
            self._life.check_appendable(self._pipeline.end_offset)
