"""Moving an empty reader group's positions as Kafka's tool moves a group's offsets.

``ReaderGroup.move_positions``: kafka-consumer-groups' --to-offset,
--shift-by and --to-current on the positions an empty reader group records
(its free segments' next offsets: event offsets, as a Kafka partition's).
Each new position is brought into the segment's [start, end], as Kafka's
tool does; the segments waiting for predecessors, the finished ones and the
checkpoints stay as they are (a shift back in a sealed segment whose
successor waits for it just makes the successor wait longer). The change is
computed inside the compare-and-set from the state it applies to, so a
shift is applied once even when an update's outcome was unknown (the
version check).

Not served by time (--to-datetime): the gRPC API has no lookup of the
offset at a timestamp (only the Kafka listener's ListOffsets has one).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Literal

from folio.errors import InvalidArgumentError, ReaderGroupNotEmptyError
from folio.models import SegmentRange
from folio.read._group_state import GroupState

__all__ = ["PositionMove", "check_empty", "move_change", "moved_positions"]

#: How ``ReaderGroup.move_positions`` moves each position.
PositionMove = Literal["offset", "shift", "current"]


def check_empty(state: GroupState) -> None:
    """``ReaderGroupNotEmptyError`` while the group has members (Kafka's rule)."""
    if state.readers:
        raise ReaderGroupNotEmptyError(
            f"reader group {state.group!r} has members online: "
            f"{', '.join(sorted(state.readers))}; stop them first (a dead member "
            f"is declared offline after the session timeout, or declare it offline "
            f"now with reader_offline)", group=state.group, members=sorted(state.readers))


def moved_positions(state: GroupState, segments: Mapping[str, SegmentRange],
                    move: PositionMove, value: int, topics: Collection[str],
                    partitions: Collection[tuple[str, int]]) -> dict[str, int]:
    """The new position of each recorded position chosen (segment -> offset, by name).

    ``topics`` / ``partitions`` (topic, segment number) choose; both empty:
    every position. ``segments``: the topics' segments (sealed ones too).
    """
    check_empty(state)
    if move not in ("offset", "shift", "current"):
        raise InvalidArgumentError(f"move positions to an offset, by a shift or to the "
                                   f"current ones, not {move!r}")
    if move == "offset" and value < 0:
        raise InvalidArgumentError(f"a negative offset: {value}")
    unknown = sorted(set(topics) - set(state.topics))
    if unknown:
        raise InvalidArgumentError(f"reader group {state.group!r} does not read {unknown} "
                                   f"(it reads {state.topics})")
    missing = sorted(f"{t}/{n}" for t, n in partitions if f"{t}/{n}" not in state.unassigned)
    if missing:
        raise InvalidArgumentError(
            f"reader group {state.group!r} records no position in {missing} (it has "
            f"positions in {sorted(state.unassigned)}; the others are finished or wait "
            "for their predecessors)")
    moved: dict[str, int] = {}
    for name, offset in sorted(state.unassigned.items()):
        topic, number = name.rsplit("/", 1)
        if (topics or partitions) and topic not in topics \
                and (topic, int(number)) not in partitions:
            continue
        segment = segments.get(name)
        if segment is None:  # made after the segments were listed: left as it is
            continue
        if move == "current":  # as it is, as Kafka's --to-current (no range check)
            moved[name] = offset
            continue
        at = value if move == "offset" else offset + value
        moved[name] = max(segment.start_offset, min(at, segment.end_offset))
    return moved


def move_change(segments: Mapping[str, SegmentRange], move: PositionMove, value: int,
                topics: Collection[str], partitions: Collection[tuple[str, int]],
                ) -> Callable[[GroupState], dict[str, int]]:
    """``move_positions``' compare-and-set change (both faces): the positions moved,
    computed from the state it applies to; pending checkpoints dropped, as a reset."""
    def change(current: GroupState) -> dict[str, int]:
        moved = moved_positions(current, segments, move, value, topics, partitions)
        current.unassigned.update(moved)
        current.pending = []
        return moved
    return change
