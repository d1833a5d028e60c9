"""Planning reads: cuts into input partitions, and a stream's next offsets.

Pure functions of the topic's segments (``Client.get_segments(topic,
include_sealed=True)``: every segment with its predecessors) and offsets, so
they are tested without Spark or a broker.

A stream's offset is a JSON object ``{segment: offset}`` of every segment the
query *tracks*. Segment order (seed "Segment order"): a segment is read only
once each predecessor it tracks was read to its sealed end in an earlier
micro-batch, so the events of one routing key come in append order across
scaling. A successor of a tracked segment is tracked from its start as soon
as it exists; a predecessor the query never tracked (sealed before the query
began) counts as finished.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from folio.errors import InvalidArgumentError
from folio.models import SegmentRange
from folio.spark._options import Positions

__all__ = ["Slice", "batch_slices", "initial_offsets", "next_offsets", "stream_slices"]


@dataclass(frozen=True, slots=True)
class Slice:
    """Offsets ``[start, end)`` of one segment: one input partition."""

    segment: str
    start: int
    end: int


def _split(segment: str, start: int, end: int, max_events: int) -> list[Slice]:
    return [Slice(segment, low, min(low + max_events, end))
            for low in range(start, end, max_events)]


def batch_slices(segments: Sequence[SegmentRange], starting: Positions, ending: Positions,
                 max_events: int) -> list[Slice]:
    """The input partitions of a batch read between two cuts, by segment number.

    Raises:
        InvalidArgumentError: a cut names an unknown segment, or an offset
            before a segment's start (truncated) or after its end.
    """
    by_name = {s.name: s for s in segments}
    for cut, name in ((starting, "startingPositions"), (ending, "endingPositions")):
        if isinstance(cut, dict):
            for named, offset in cut.items():
                known = by_name.get(named)
                if known is None:
                    raise InvalidArgumentError(f"option {name!r} names unknown segment "
                                               f"{named!r}")
                if not known.start_offset <= offset <= known.end_offset:
                    raise InvalidArgumentError(
                        f"option {name!r}: offset {offset} of {named!r} is outside its "
                        f"readable range [{known.start_offset}, {known.end_offset}]")
    slices: list[Slice] = []
    for segment in sorted(segments, key=lambda s: s.number):
        if isinstance(starting, dict):
            start = starting.get(segment.name, segment.start_offset)
        else:
            start = segment.start_offset if starting == "earliest" else segment.end_offset
        end = ending.get(segment.name, segment.end_offset) if isinstance(ending, dict) \
            else segment.end_offset
        if start > end:
            raise InvalidArgumentError(f"segment {segment.name!r} starts at {start} but ends "
                                       f"at {end}: endingPositions is before startingPositions")
        slices += _split(segment.name, start, end, max_events)
    return slices


def initial_offsets(segments: Sequence[SegmentRange], starting: Positions) -> dict[str, int]:
    """A new stream's offset: every segment (``earliest``), the open ones at their ends
    (``latest``), or the open ones at their start with the given ones where given."""
    if isinstance(starting, dict):
        offsets = {s.name: s.start_offset for s in segments if not s.sealed}
        offsets.update(starting)
    elif starting == "earliest":
        offsets = {s.name: s.start_offset for s in segments}
    else:
        offsets = {s.name: s.end_offset for s in segments if not s.sealed}
    return dict(sorted(offsets.items()))


def next_offsets(segments: Sequence[SegmentRange], start: Mapping[str, int],
                 max_events: int | None = None,
                 target: Mapping[str, int] | None = None) -> dict[str, int]:
    """The end offset of the next micro-batch starting at ``start``.

    Successors of tracked segments join at their start. Each readable segment
    (every tracked predecessor finished in ``start``) advances to its end
    offset, or to ``target``'s offset when given (``availableNow``: segments
    ``target`` lacks stay put). ``max_events`` caps the events of the whole
    micro-batch, shared fairly among the segments that have some.
    Equal to ``start`` when there is nothing new.
    """
    by_name = {s.name: s for s in segments}
    offsets = dict(start)
    for segment in sorted(segments, key=lambda s: s.number):
        if segment.name not in offsets and any(p in offsets for p in segment.predecessors):
            offsets[segment.name] = segment.start_offset

    def finished(name: str) -> bool:
        if name not in offsets:
            return True  # never tracked: before the query began
        known = by_name.get(name)
        return (known is not None and known.sealed and name in start
                and start[name] >= known.end_offset)

    available: dict[str, int] = {}
    for name, offset in offsets.items():
        tracked = by_name.get(name)
        if tracked is None or not all(finished(p) for p in tracked.predecessors):
            continue
        end = tracked.end_offset
        if target is not None:
            end = min(end, target.get(name, offset))
        if end > offset:
            available[name] = end - offset
    taken = available if max_events is None else _share(available, max_events)
    for name, count in taken.items():
        offsets[name] += count
    return dict(sorted(offsets.items()))


def _share(available: Mapping[str, int], budget: int) -> dict[str, int]:
    """At most ``budget`` events in all, shared fairly (water-filling) over ``available``."""
    taken: dict[str, int] = {}
    pending = sorted(available.items(), key=lambda item: (item[1], item[0]))
    for index, (name, count) in enumerate(pending):
        share = budget // (len(pending) - index)
        taken[name] = min(count, share)
        budget -= taken[name]
    for name, count in sorted(available.items()):  # a remainder smaller than the segments
        if budget <= 0:
            break
        if taken[name] < count:
            taken[name] += 1
            budget -= 1
    return taken


def stream_slices(start: Mapping[str, int], end: Mapping[str, int],
                  max_events: int) -> list[Slice]:
    """The input partitions of the micro-batch ``start`` -> ``end``, by segment name."""
    slices: list[Slice] = []
    for name in sorted(end):
        low = start.get(name, end[name])
        slices += _split(name, low, end[name], max_events)
    return slices
