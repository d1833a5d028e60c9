"""Scaling plans: which segments to seal and which to make, checked; the auto-scaling rule.

Pure functions over a topic record (``broker.topics.records``); the topic
manager applies a plan with one conditional update of the record. A plan's
new ranges must exactly cover the ranges of the segments it seals (split,
merge, or both); each new segment's predecessors are the sealed segments
whose ranges overlap its own.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise

from broker.api import SegmentState, TopicConfig
from broker.errors import InvalidArgumentError, NoSuchSegmentError, SegmentSealedError
from broker.segments.names import make_segment_name, parse_segment_name
from broker.topics.records import TopicRecord, TopicSegment

__all__ = ["MAX_OPEN_SEGMENTS", "SNAP", "RateMeter", "ScalePlan", "auto_scale", "plan_scale",
           "successors_of"]

#: Most open segments a topic may have.
MAX_OPEN_SEGMENTS = 1024
#: A new boundary this close to a sealed segment's boundary is taken as it.
SNAP = 1e-9

Interval = tuple[float, float]


@dataclass(frozen=True, slots=True)
class ScalePlan:
    """The segments to seal (numbers) and the ones to make (numbers from the record's next)."""

    seal: tuple[int, ...]
    created: tuple[TopicSegment, ...]


def _fmt(intervals: Sequence[Interval]) -> str:
    return ", ".join(f"[{low!r}, {high!r})" for low, high in intervals)


def _merged(intervals: Sequence[Interval]) -> list[Interval]:
    """Sorted intervals with touching neighbours joined."""
    out: list[Interval] = []
    for low, high in sorted(intervals):
        if out and out[-1][1] == low:
            out[-1] = (out[-1][0], high)
        else:
            out.append((low, high))
    return out


def _snap(value: float, boundaries: Sequence[float]) -> float:
    for boundary in boundaries:
        if abs(value - boundary) <= SNAP:
            return boundary
    return value


def _sealed_entries(record: TopicRecord, seal: Sequence[str]) -> list[TopicSegment]:
    if not seal:
        raise InvalidArgumentError("seal names no segment: give at least one open segment to seal")
    by_number = {s.number: s for s in record.segments}
    entries: list[TopicSegment] = []
    seen: set[int] = set()
    for name in seal:
        try:
            topic, number = parse_segment_name(name)
        except NoSuchSegmentError:
            raise InvalidArgumentError(
                f"{name!r} is not a segment name ('<topic>/<number>')") from None
        if topic != record.name:
            raise InvalidArgumentError(
                f"segment {name!r} is not a segment of topic {record.name!r}")
        if number in seen:
            raise InvalidArgumentError(f"segment {name!r} is named twice in seal")
        seen.add(number)
        entry = by_number.get(number)
        if entry is None:
            raise NoSuchSegmentError(name)
        if entry.state is SegmentState.SEALED:
            raise SegmentSealedError(name, -1)
        entries.append(entry)
    return entries


def _checked_ranges(new_ranges: Sequence[Interval], boundaries: Sequence[float]) -> list[Interval]:
    if not new_ranges:
        raise InvalidArgumentError("new_ranges is empty: give the key ranges of the new segments")
    ranges: list[Interval] = []
    for low, high in new_ranges:
        if not (math.isfinite(low) and math.isfinite(high) and 0.0 <= low < high <= 1.0):
            raise InvalidArgumentError(
                f"range [{low!r}, {high!r}) is not a key range: need 0 <= low < high <= 1")
        ranges.append((_snap(low, boundaries), _snap(high, boundaries)))
    ranges.sort()
    for (low0, high0), (low1, high1) in pairwise(ranges):
        if low1 < high0:
            raise InvalidArgumentError(
                f"ranges [{low0!r}, {high0!r}) and [{low1!r}, {high1!r}) overlap")
    return ranges


def _check_cover(ranges: list[Interval], sealed: list[Interval]) -> None:
    for low, high in ranges:
        if not any(s_low <= low and high <= s_high for s_low, s_high in sealed):
            raise InvalidArgumentError(
                f"range [{low!r}, {high!r}) reaches outside the sealed segments' ranges "
                f"{_fmt(sealed)}")
    covered = _merged(ranges)
    if covered != sealed:
        gaps: list[Interval] = []
        for s_low, s_high in sealed:
            at = s_low
            for low, high in covered:
                if s_low <= low < s_high:
                    if low > at:
                        gaps.append((at, low))
                    at = high
            if at < s_high:
                gaps.append((at, s_high))
        raise InvalidArgumentError(
            f"the new ranges leave {_fmt(gaps)} of the sealed segments' ranges "
            f"{_fmt(sealed)} uncovered")


def plan_scale(record: TopicRecord, seal: Sequence[str],
               new_ranges: Sequence[Interval]) -> ScalePlan:
    """Check a ScaleTopic request against the topic record; the plan, or why not.

    Raises:
        InvalidArgumentError: no segment or range, a name twice or of another
            topic, a bad range, ranges that overlap, leave a gap or reach outside
            the sealed ranges, too many open segments after.
        NoSuchSegmentError: a segment the topic does not have.
        SegmentSealedError: a segment sealed already (``end_offset`` -1: unknown here).
    """
    entries = _sealed_entries(record, seal)
    boundaries = sorted({b for e in entries for b in (e.key_low, e.key_high)})
    ranges = _checked_ranges(new_ranges, boundaries)
    sealed = _merged([(e.key_low, e.key_high) for e in entries])
    _check_cover(ranges, sealed)
    open_after = sum(s.state is SegmentState.OPEN for s in record.segments) \
        - len(entries) + len(ranges)
    if open_after > MAX_OPEN_SEGMENTS:
        raise InvalidArgumentError(
            f"the topic would have {open_after} open segments; at most {MAX_OPEN_SEGMENTS}")
    created = tuple(
        TopicSegment(record.next_segment_number + i, low, high, SegmentState.OPEN,
                     tuple(sorted(e.number for e in entries
                                  if e.key_low < high and low < e.key_high)))
        for i, (low, high) in enumerate(ranges)
    )
    return ScalePlan(tuple(e.number for e in entries), created)


def successors_of(record: TopicRecord) -> dict[int, list[int]]:
    """Segment number -> the numbers of its successors, ascending."""
    successors: dict[int, list[int]] = {}
    for entry in record.segments:
        for number in entry.predecessors:
            successors.setdefault(number, []).append(entry.number)
    return successors


def auto_scale(topic: str, open_segments: Sequence[TopicSegment], rates: Mapping[int, float],
               config: TopicConfig) -> tuple[list[str], list[Interval]] | None:
    """The auto-scaling rule: one change to make now, as (segments to seal, new ranges), or None.

    ``open_segments`` of ``topic``, ``rates`` their events/s (a segment without
    a rate yet is left alone). Splits the hottest segment above the target in
    two halves; else merges the two neighbours of least total rate if it is
    below half the target, keeping at least ``scale_min_segments``.
    """
    target = config.scale_target_events_per_s
    if target <= 0 or not open_segments:
        return None
    ordered = sorted(open_segments, key=lambda s: s.key_low)
    hot = [(rates[s.number], s) for s in ordered if rates.get(s.number, 0.0) > target]
    if hot and len(ordered) < MAX_OPEN_SEGMENTS:
        _, segment = max(hot, key=lambda pair: pair[0])
        middle = (segment.key_low + segment.key_high) / 2
        if segment.key_low < middle < segment.key_high:
            return ([make_segment_name(topic, segment.number)],
                    [(segment.key_low, middle), (middle, segment.key_high)])
    if len(ordered) <= config.scale_min_segments:
        return None
    best: tuple[float, TopicSegment, TopicSegment] | None = None
    for left, right in pairwise(ordered):
        if left.key_high != right.key_low or left.number not in rates \
                or right.number not in rates:
            continue
        total = rates[left.number] + rates[right.number]
        if total < target / 2 and (best is None or total < best[0]):
            best = (total, left, right)
    if best is None:
        return None
    _, left, right = best
    return ([make_segment_name(topic, left.number), make_segment_name(topic, right.number)],
            [(left.key_low, right.key_high)])



class RateMeter:
    """Each open segment's event rate between two maintenance rounds.

    A segment's first round gives it no rate (it is left alone by
    ``auto_scale``); a segment not loaded on this broker takes no appends
    here, so its end offset is taken as unchanged since it was last loaded
    (one never loaded here has no rate).
    """

    def __init__(self) -> None:
        self._samples: dict[str, dict[int, tuple[int, int]]] = {}

    def sample(self, topic: str, now_ms: int, ends: Mapping[int, int | None]) -> dict[int, float]:
        """Record the open segments' end offsets (None: not loaded); their rates in events/s."""
        before = self._samples.get(topic, {})
        now: dict[int, tuple[int, int]] = {}
        rates: dict[int, float] = {}
        for number, loaded_end in ends.items():
            previous = before.get(number)
            end = loaded_end if loaded_end is not None else \
                (previous[1] if previous is not None else None)
            if end is None:
                continue  # never loaded here: no rate until it is
            now[number] = (now_ms, end)
            if previous is not None and now_ms > previous[0]:
                rates[number] = max(0, end - previous[1]) * 1000.0 / (now_ms - previous[0])
        self._samples[topic] = now
        return rates
