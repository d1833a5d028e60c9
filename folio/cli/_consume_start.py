"""Where ``folio consume`` starts: ``--from-offset SEG:OFF`` and ``--from-time TIME``.

The broker has no time index, so ``--from-time`` finds, in each segment, the
first event whose timestamp is at or after the time by binary search on
reads: each probe reads the first event at or after an offset (one short
Read stream), about log2(length) probes per segment. Timestamps are set by
writers, so within a segment they are only nearly ordered; like Kafka's
``offsetsForTimes`` the search assumes they grow, and an event a little out
of order near the boundary may fall on either side. Events without a
timestamp count as older than any time.

A start is a *plan*: what to give ``Client.reader`` and, per segment, the
first offset to print. When every segment the start falls in is still open
(the topic was not scaled since), the reader starts exactly there. When the
start lies in sealed segments (before a scaling), the reader starts at the
earliest events and the events before the start are read and skipped here,
so that segments are still read in order across scaling (a successor only
after its predecessors); this costs reading the older events once.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
from collections.abc import Iterable, Mapping, Sequence

import folio
from folio.errors import InvalidArgumentError

__all__ = ["StartPlan", "first_offset_at", "offset_start", "parse_time_ms",
           "plan_from_offsets", "plan_from_time"]

Start = str | Mapping[str, int]


@dataclasses.dataclass(frozen=True)
class StartPlan:
    """What to give ``Client.reader`` and which events to skip after it.

    Attributes:
        start: ``"earliest"``, ``"latest"`` or segment name -> offset.
        skip_before: segment name -> its first offset to print; events of
            segments not named are all printed.
    """

    start: Start
    skip_before: Mapping[str, int] = dataclasses.field(default_factory=dict)


def offset_start(text: str) -> tuple[str, int]:
    """``--from-offset SEG:OFF``: a segment (number or name) and an offset (argparse type)."""
    segment, sep, offset = text.rpartition(":")
    try:
        value = int(offset)
    except ValueError:
        value = -1
    if not sep or not segment or value < 0:
        raise argparse.ArgumentTypeError(
            f"expected SEGMENT:OFFSET like 0:42 or orders/0:42, got {text!r}")
    return segment, value


def parse_time_ms(text: str) -> int:
    """``--from-time``: ISO 8601 (UTC unless a zone is given) or ms since the epoch."""
    if text.isdigit():
        return int(text)
    try:
        when = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected an ISO 8601 time like 2026-11-24T03:00:00Z or ms since the epoch, "
            f"got {text!r}") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    return int(when.timestamp() * 1000)


def _ancestors(by_name: Mapping[str, folio.SegmentRange], of: Iterable[str]) -> set[str]:
    found: set[str] = set()
    todo = [p for name in of for p in by_name[name].predecessors]
    while todo:
        name = todo.pop()
        if name not in found and name in by_name:
            found.add(name)
            todo.extend(by_name[name].predecessors)
    return found


def _descendants(by_name: Mapping[str, folio.SegmentRange], of: Iterable[str]) -> set[str]:
    found: set[str] = set()
    todo = [s for name in of for s in by_name[name].successors]
    while todo:
        name = todo.pop()
        if name not in found and name in by_name:
            found.add(name)
            todo.extend(by_name[name].successors)
    return found


def plan_from_offsets(topic: str, every: Sequence[folio.SegmentRange],
                      offsets: Sequence[tuple[str, int]], from_beginning: bool) -> StartPlan:
    """Start the named segments at their offsets, the other active ones at their first event.

    As ``Client.reader(topic, start={segment: offset})`` does (one rule for SDK
    and CLI); ``from_beginning`` reads also the sealed history of the segments
    not named, from the topic's first segments. ``every``: all the topic's
    segments, sealed ones included. A named segment's successors are read
    whole after it; its predecessors not at all.

    Raises:
        InvalidArgumentError: a segment that is not the topic's.
    """
    by_name = {s.name: s for s in every}
    named: dict[str, int] = {}
    for segment, offset in offsets:
        name = segment if "/" in segment else f"{topic}/{segment}"
        if name not in by_name:
            raise InvalidArgumentError(
                f"--from-offset: topic {topic!r} has no segment {segment!r} (it has "
                f"{', '.join(s.name.rpartition('/')[2] for s in every)})")
        named[name] = offset
    active = [s for s in every if not s.sealed]
    if all(not by_name[name].sealed for name in named) and (
            not from_beginning or len(active) == len(every)):
        start = {s.name: s.start_offset for s in active}
        return StartPlan({**start, **named})
    # Unnamed sealed segments are read only with --from-beginning; unnamed
    # active ones from their first event either way.
    skip = {s.name: s.start_offset if from_beginning or not s.sealed else s.end_offset
            for s in every}
    skip.update(dict.fromkeys(_descendants(by_name, named), 0))
    skip.update({name: by_name[name].end_offset for name in _ancestors(by_name, named)})
    skip.update(named)
    return StartPlan("earliest", skip)


def _first_at_or_after(batch: folio.BatchClient, segment: folio.SegmentRange,
                       offset: int) -> folio.Event[bytes] | None:
    """The first readable event of ``segment`` at ``offset`` or later, or None."""
    # read_uncommitted: a committed read would wait before an open transaction's
    # first event; any event's timestamp serves the search.
    events = batch.read_segment(segment.name, offset, segment.end_offset,
                                isolation="read_uncommitted")
    try:
        return next(iter(events), None)
    finally:
        close = getattr(events, "close", None)
        if close is not None:
            close()  # stops the stream


def first_offset_at(batch: folio.BatchClient, segment: folio.SegmentRange,
                    time_ms: int) -> int:
    """The offset of ``segment``'s first event stamped ``time_ms`` or later (its end if none).

    Binary search on reads, assuming timestamps grow within the segment.
    """
    # Invariant: every readable event before ``low`` is older than ``time_ms``,
    # and the first readable event from ``high`` on is at ``found``, not older
    # (``found`` is the end when there is none).
    low, high = segment.start_offset, segment.end_offset
    found = high
    while low < high:
        middle = (low + high) // 2
        event = _first_at_or_after(batch, segment, middle)
        if event is None:  # only left-out events (e.g. aborted ones) from there
            high, found = middle, segment.end_offset
        elif (event.timestamp or 0) >= time_ms:
            high, found = middle, event.offset
        else:
            low = event.offset + 1
    return found


def plan_from_time(client: folio.Client, topic: str, time_ms: int) -> StartPlan:
    """Start every segment at its first event stamped ``time_ms`` or later."""
    every = client.get_segments(topic, include_sealed=True)
    batch = client.batch_client()
    first = {s.name: first_offset_at(batch, s, time_ms) for s in every}
    if all(first[s.name] >= s.end_offset for s in every if s.sealed):
        # Everything sealed is older: the start lies in the open segments only.
        return StartPlan({s.name: first[s.name] for s in every if not s.sealed})
    return StartPlan("earliest", first)
