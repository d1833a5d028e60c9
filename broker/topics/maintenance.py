"""The background round: rollover by age, retention, writer expiry, auto-scaling, hooks.

Runs every ``retention_interval_s`` over the loaded segments; a failure of
one segment or hook is logged and the round goes on.
"""

from __future__ import annotations

import asyncio
import logging

from broker.api import SegmentState
from broker.errors import (
    BrokerError,
)
from broker.segments.names import (
    is_system_topic,
)
from broker.topics._scale import TopicScaling
from broker.topics.scaling import auto_scale
from ledger.errors import LedgerError

__all__ = ["TopicMaintenance"]

log = logging.getLogger(__name__)


class TopicMaintenance(TopicScaling):
    """The maintenance task (a part of ``TopicManager``)."""

    async def start(self) -> None:
        """Start the background task (retention, rollover by age)."""
        if self._task is None and not self._closed:
            self._task = asyncio.create_task(self._maintain_forever(), name="topic-maintenance")

    async def run_maintenance(self) -> None:
        """One round of background work on every loaded segment.

        Forgets idle writers, rolls ledgers over by age, applies retention,
        then runs the maintenance hooks.
        """
        now_ms = self._now_ms()
        for segment in list(self._segments.values()):
            if not segment.usable:
                continue
            try:
                await segment.tick(now_ms)
                await segment.apply_retention(now_ms)
            except (BrokerError, LedgerError) as error:
                log.warning("segment %s: maintenance failed: %s", segment.name, error)
        await self._auto_scale(now_ms)
        for hook in list(self._hooks):
            try:
                await hook()
            except (BrokerError, LedgerError) as error:
                log.warning("maintenance hook %r failed: %s", hook, error)

    async def _auto_scale(self, now_ms: int) -> None:
        """Measure the event rates of auto-scaled topics' segments; scale where the rule says."""
        topics = {segment.name.rpartition("/")[0] for segment in self._segments.values()
                  if segment.usable and segment.config.scale_target_events_per_s > 0}
        for topic in sorted(topics):
            if is_system_topic(topic):
                continue
            try:
                record, _ = await self._read_topic(topic)
                open_entries = [e for e in record.segments if e.state is SegmentState.OPEN]
                ends: dict[int, int | None] = {}
                for entry in open_entries:
                    # From the loaded segment, else its record (a segment never written).
                    ends[entry.number] = (await self._segment_offsets(topic, entry)).end_offset
                rates = self._rates.sample(topic, now_ms, ends)
                config = record.config
                if now_ms - record.scaled_ms < config.scale_cooldown_ms:
                    continue
                change = auto_scale(topic, open_entries, rates, config)
                if change is not None:
                    seal, ranges = change
                    log.info("auto-scaling topic %s: sealing %s, new ranges %s (rates %s)",
                             topic, seal, ranges, rates)
                    await self.scale_topic(topic, seal, ranges, scaled_ms=now_ms)
            except (BrokerError, LedgerError) as error:
                log.warning("topic %s: auto-scaling failed: %s", topic, error)

    async def _maintain_forever(self) -> None:
        # Until closed, not only until cancelled: a cancellation swallowed by
        # code under a hook (a CancelledError turned into an error the round
        # logs) would leave close() awaiting this task for ever, and the
        # broker would not exit on SIGTERM (seen in the cluster tests).
        while not self._closed:
            await asyncio.sleep(self._interval_s)
            if self._closed:
                return
            try:
                await self.run_maintenance()
            except Exception:
                log.exception("topic maintenance failed")
