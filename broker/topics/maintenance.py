"""The background round: rollover by age, retention, writer expiry, auto-scaling, hooks.

``TopicMaintenance`` is a part of ``TopicManager`` that owns its state: the
task, the hooks, the interval and the rate meter of auto-scaling. It runs every
``interval_s`` over the loaded segments of the topics it is given
(``MaintainedTopics``); a failure of one segment or hook is logged and the
round goes on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from broker.api import ScaleOutcome, SegmentState
from broker.errors import (
    BrokerError,
)
from broker.segments.names import (
    is_system_topic,
)
from broker.segments.segment import LedgerSegment
from broker.topics.records import TopicRecord
from broker.topics.scaling import RateMeter, auto_scale
from ledger.errors import LedgerError
from ledger.tasks import cancel_and_wait

__all__ = ["MaintainedTopics", "TopicMaintenance"]

log = logging.getLogger(__name__)


class MaintainedTopics(Protocol):
    """What the round needs of the topics it maintains (``TopicManager``)."""

    def loaded_segments(self) -> list[LedgerSegment]:
        """The segments loaded now (a copy)."""
        ...

    async def open_segment_ends(self, topic: str) -> tuple[TopicRecord, dict[int, int | None]]:
        """The topic's record and the end offsets of its open segments, by number."""
        ...

    async def scale_topic(self, topic: str, seal: Sequence[str],
                          new_ranges: Sequence[tuple[float, float]], *,
                          scaled_ms: int | None = None) -> ScaleOutcome:
        """Seal ``seal`` and create successors over ``new_ranges``."""
        ...


class TopicMaintenance:
    """The maintenance task of a ``TopicManager``.

    Args:
        topics: what it maintains.
        interval_s: how often the background task runs a round.
        clock: seconds since the epoch.
    """

    def __init__(self, topics: MaintainedTopics, *, interval_s: float,
                 clock: Callable[[], float]) -> None:
        self._topics = topics
        self._interval_s = interval_s
        self._clock = clock
        self._hooks: list[Callable[[], Awaitable[object]]] = []
        self._rates = RateMeter()
        self._task: asyncio.Task[None] | None = None
        self._stopped = False

    def add_hook(self, hook: Callable[[], Awaitable[object]]) -> None:
        """Run ``hook`` after every round (e.g. compaction of a system topic)."""
        self._hooks.append(hook)

    def start(self) -> None:
        """Start the background task, unless started or stopped already."""
        if self._task is None and not self._stopped:
            self._task = asyncio.create_task(self._maintain_forever(), name="topic-maintenance")

    async def stop(self) -> None:
        """End the background task (a round under way is cancelled); it never starts again."""
        self._stopped = True
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None

    async def run_round(self) -> None:
        """One round of background work on every loaded segment.

        Forgets idle writers, rolls ledgers over by age, applies retention,
        then runs the hooks.
        """
        now_ms = int(self._clock() * 1000)
        for segment in self._topics.loaded_segments():
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
        topics = {segment.name.rpartition("/")[0] for segment in self._topics.loaded_segments()
                  if segment.usable and segment.config.scale_target_events_per_s > 0}
        for topic in sorted(topics):
            if is_system_topic(topic):
                continue
            try:
                record, ends = await self._topics.open_segment_ends(topic)
                open_entries = [e for e in record.segments if e.state is SegmentState.OPEN]
                rates = self._rates.sample(topic, now_ms, ends)
                config = record.config
                if now_ms - record.scaled_ms < config.scale_cooldown_ms:
                    continue
                change = auto_scale(topic, open_entries, rates, config)
                if change is not None:
                    seal, ranges = change
                    log.info("auto-scaling topic %s: sealing %s, new ranges %s (rates %s)",
                             topic, seal, ranges, rates)
                    await self._topics.scale_topic(topic, seal, ranges, scaled_ms=now_ms)
            except (BrokerError, LedgerError) as error:
                log.warning("topic %s: auto-scaling failed: %s", topic, error)

    async def _maintain_forever(self) -> None:
        # Until stopped, not only until cancelled: a cancellation swallowed by
        # code under a hook (a CancelledError turned into an error the round
        # logs) would leave stop() awaiting this task for ever, and the
        # broker would not exit on SIGTERM (seen in the cluster tests).
        while not self._stopped:
            await asyncio.sleep(self._interval_s)
            if self._stopped:
                return
            try:
                await self.run_round()
            except Exception:
                log.exception("topic maintenance failed")
