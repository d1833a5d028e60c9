"""Where a reader starts: the ``start`` argument of ``Client.reader`` as segment offsets."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Literal

from folio.errors import InvalidArgumentError
from folio.models import SegmentRange

__all__ = ["Start", "ancestors", "start_positions"]

#: Where a reader starts: "earliest", "latest", or segment name -> offset.
Start = Literal["earliest", "latest"] | str | Mapping[str, int]


def start_positions(topic: str, every: list[SegmentRange], start: Start) -> dict[str, int]:
    """The first offset to read of each segment ``start`` names, of ``every`` segment of ``topic``.

    Raises ``InvalidArgumentError`` for a bad ``start`` or a mapping naming a
    segment of another topic or a negative offset.
    """
    segments = [s for s in every if not s.sealed]
    positions: dict[str, int]
    if start == "earliest":
        positions = {s.name: s.start_offset for s in every if not s.predecessors}
    elif start == "latest":
        positions = {s.name: s.end_offset for s in segments}
    elif isinstance(start, Mapping):
        positions = {s.name: s.start_offset for s in segments}
        for name, offset in start.items():
            if not name.startswith(f"{topic}/"):
                raise InvalidArgumentError(
                    f"segment {name!r} is not a segment of topic {topic!r}")
            if offset < 0:
                raise InvalidArgumentError(f"offset {offset} of {name!r} is negative")
            positions[name] = offset
    else:
        raise InvalidArgumentError(
            f"start must be 'earliest', 'latest' or a mapping of segment to offset, "
            f"not {start!r}")
    return positions


def ancestors(segments: list[SegmentRange], of: Collection[str]) -> set[str]:
    """The names of every predecessor, transitively, of the segments named in ``of``."""
    predecessors = {s.name: s.predecessors for s in segments}
    found: set[str] = set()
    todo = [p for name in of for p in predecessors.get(name, ())]
    while todo:
        name = todo.pop()
        if name not in found:
            found.add(name)
            todo.extend(predecessors.get(name, ()))
    return found
