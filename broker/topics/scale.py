"""Applying scaling: seal segments and create their successors by one CAS of the topic record.

``TopicScaling`` is a part of ``TopicManager``. Its collaborators, passed
in: the ``TopicCatalog`` (topic locks, record reads and compare-and-sets,
segment records, descriptions), the table of loaded segments (which seals
them in the ledger service) and the owner's ``check_open``.

The plans are ``broker.topics.scaling`` (pure); here they are applied, the
sealed segments then sealed in the ledger service (loading a successor seals
its predecessors first, so a crash in between is rolled forward). Sealing a
whole topic and the successor queries live here too.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import replace

from broker.api import ScaleOutcome, SegmentRange, SegmentState, TopicInfo
from broker.errors import (
    BrokerError,
    NoSuchSegmentError,
    SegmentSealedError,
    TopicNotFoundError,
    WrongHostError,
)
from broker.segments.names import parse_segment_name
from broker.topics.catalog import CAS_ATTEMPTS, TopicCatalog
from broker.topics.internal import refuse_internal_topic
from broker.topics.loaded import LoadedSegments
from broker.topics.records import TopicRecord, TopicSegment
from broker.topics.scaling import plan_scale, successors_of
from ledger.errors import LedgerError, NoNodeError

__all__ = ["TopicScaling"]

log = logging.getLogger(__name__)

_CHANGE = "under a scaling change"


class TopicScaling:
    """Scaling, sealing and successors (a part of ``TopicManager``).

    Args:
        catalog: the topic locks, records and descriptions.
        loaded: the table of loaded segments (``ensure_sealed``).
        check_open: raises ``BrokerShuttingDownError`` once the owner closes.
    """

    def __init__(self, catalog: TopicCatalog, loaded: LoadedSegments, *,
                 check_open: Callable[[], None]) -> None:
        self._catalog = catalog
        self._loaded = loaded
        self._check_open = check_open

    async def list_segments(self, topic: str, *, include_sealed: bool) -> list[SegmentRange]:
        """Open segments by ``key_low``, or (``include_sealed``) every segment by number."""
        self._check_open()
        record, _ = await self._catalog.read(topic)
        successors = successors_of(record)
        entries = [e for e in record.segments
                   if include_sealed or e.state is SegmentState.OPEN]
        ranges = [await self._catalog.segment_range(topic, e, successors) for e in entries]
        ranges.sort(key=(lambda r: r.number) if include_sealed else (lambda r: r.key_low))
        return ranges

    async def scale_topic(self, topic: str, seal: Sequence[str],
                          new_ranges: Sequence[tuple[float, float]], *,
                          scaled_ms: int | None = None) -> ScaleOutcome:
        """Seal ``seal`` and create successors whose ranges exactly cover theirs.

        One conditional update of the topic record makes the change (all or
        nothing); the sealed segments are then sealed in the ledger service
        before this returns (loading a successor also seals its predecessors
        first, so a crash in between is rolled forward). ``scaled_ms``
        (auto-scaling) is recorded as the topic's last scaling time.

        Raises ``InvalidArgumentError`` (see ``broker.topics.scaling.plan_scale``),
        ``InternalTopicError`` (a system topic), ``NoSuchSegmentError``,
        ``SegmentSealedError``, ``TopicNotFoundError``.
        """
        self._check_open()
        refuse_internal_topic(topic, "ScaleTopic")
        async with self._catalog.lock(topic):
            for _ in range(CAS_ATTEMPTS):
                record, version = await self._catalog.read(topic)
                try:
                    plan = plan_scale(record, seal, new_ranges)
                except SegmentSealedError as error:
                    end = await self._end_offset(topic, error.segment)
                    raise SegmentSealedError(error.segment, end) from None
                for entry in plan.created:
                    await self._catalog.create_segment_record(topic, entry.number)
                updated = replace(
                    record,
                    segments=tuple(
                        replace(s, state=SegmentState.SEALED) if s.number in plan.seal else s
                        for s in record.segments) + plan.created,
                    next_segment_number=record.next_segment_number + len(plan.created),
                    scaled_ms=record.scaled_ms if scaled_ms is None else scaled_ms)
                if await self._catalog.replace(topic, updated, version, change=_CHANGE):
                    break
            else:
                raise BrokerError(f"topic {topic!r} kept changing; not scaled")
            for number in plan.seal:
                try:
                    await self._loaded.ensure_sealed(topic, number)
                except WrongHostError:
                    # Another broker took the segment while this one sealed it:
                    # in a cluster the owner of a successor loads it, and loading
                    # a successor seals its predecessors first, so that broker
                    # seals it. The scale is made (the CAS above): answering
                    # WrongHost would say "not applied", and a client following
                    # it would find the segments sealed and report a failure.
                    log.info("scaled topic %s: segment %d sealed by the broker that "
                             "took it", topic, number)
        log.info("scaled topic %s: sealed %s, created %s", topic, list(plan.seal),
                 [(e.number, e.key_low, e.key_high) for e in plan.created])
        successors = successors_of(updated)
        by_number = {e.number: e for e in updated.segments}
        sealed = [await self._catalog.segment_range(topic, by_number[n], successors)
                  for n in plan.seal]
        created = [await self._catalog.segment_range(topic, e, successors)
                   for e in plan.created]
        return ScaleOutcome(tuple(sorted(sealed, key=lambda r: r.key_low)),
                            tuple(sorted(created, key=lambda r: r.key_low)))

    async def get_successors(self, segment: str) -> tuple[SegmentRange, list[SegmentRange]]:
        """The segment and its successors by ``key_low``. ``NoSuchSegmentError``."""
        self._check_open()
        topic, number = parse_segment_name(segment)
        try:
            record, _ = await self._catalog.read(topic)
        except TopicNotFoundError:
            raise NoSuchSegmentError(segment) from None
        entry = next((s for s in record.segments if s.number == number), None)
        if entry is None:
            raise NoSuchSegmentError(segment)
        successors = successors_of(record)
        after = [await self._catalog.segment_range(topic, e, successors)
                 for e in record.segments if number in e.predecessors]
        after.sort(key=lambda r: r.key_low)
        return await self._catalog.segment_range(topic, entry, successors), after

    async def seal_topic(self, topic: str) -> TopicInfo:
        """Seal every open segment, without successors; the topic takes no more events.

        Idempotent. ``TopicNotFoundError``; ``InternalTopicError`` for a system topic.
        """
        self._check_open()
        refuse_internal_topic(topic, "SealTopic")
        async with self._catalog.lock(topic):
            for _ in range(CAS_ATTEMPTS):
                record, version = await self._catalog.read(topic)
                to_seal = [e.number for e in record.segments if e.state is SegmentState.OPEN]
                updated = replace(record, sealed=True, segments=tuple(
                    replace(s, state=SegmentState.SEALED) for s in record.segments))
                if record.sealed and not to_seal:
                    break  # sealed already: finish any seal a crash cut short below
                if await self._catalog.replace(topic, updated, version, change=_CHANGE):
                    break
            else:
                raise BrokerError(f"topic {topic!r} kept changing; not sealed")
            # Sealed already: finish the seals a crash may have cut short.
            targets = to_seal or [e.number for e in updated.segments
                                  if e.number not in successors_of(updated)]
            for number in targets:
                await self._loaded.ensure_sealed(topic, number)
        log.info("sealed topic %s", topic)
        return await self._catalog.info(updated)

    async def open_segment_ends(self, topic: str) -> tuple[TopicRecord, dict[int, int | None]]:
        """The topic's record and the end offsets of its open segments, by number.

        From the loaded segment, else its record (a segment never written).
        ``TopicNotFoundError``; for auto-scaling (``broker.topics.maintenance``).
        """
        record, _ = await self._catalog.read(topic)
        ends: dict[int, int | None] = {}
        for entry in record.segments:
            if entry.state is SegmentState.OPEN:
                ends[entry.number] = (await self._catalog.segment_offsets(topic, entry)).end_offset
        return record, ends

    async def _end_offset(self, topic: str, segment: str) -> int:
        _, number = parse_segment_name(segment)
        with contextlib.suppress(BrokerError, LedgerError, NoNodeError):
            return (await self._catalog.segment_range(
                topic, TopicSegment(number, 0.0, 1.0))).end_offset
        return -1
