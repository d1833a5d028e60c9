"""Where a reader starts: the ``start`` argument of ``Client.reader`` as segment offsets.

``start`` takes the same kinds of point a reader group starts at (``"earliest"``,
``"latest"``, a ``StreamCut``, a ``Checkpoint``, or a mapping of segment name
to the offset of the next event to read): one position model for readers,
reader groups and batch reads (docs/sdk.md, "Positions"). Active segments a
mapping or cut leaves out start at their first readable event, as the CLI's
``--from-offset`` does with the segments it does not name.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Literal

from folio.errors import InvalidArgumentError
from folio.models import SegmentRange
from folio.read.cuts import Checkpoint, StreamCut

__all__ = ["Start", "ancestors", "start_positions"]

#: Where a reader starts: "earliest", "latest", a cut or checkpoint, or segment name -> offset.
Start = Literal["earliest", "latest"] | str | Mapping[str, int] | StreamCut | Checkpoint


def start_positions(topic: str, every: list[SegmentRange], start: Start) -> dict[str, int]:
    """The first offset to read of each segment ``start`` names, of ``every`` segment of ``topic``.

    A ``StreamCut`` or ``Checkpoint`` (which may span topics) gives its
    offsets of ``topic``'s segments. Raises ``InvalidArgumentError`` for a bad
    ``start``, a mapping naming a segment of another topic or a negative
    offset, or a cut without a segment of ``topic``.
    """
    segments = [s for s in every if not s.sealed]
    if isinstance(start, Checkpoint):
        start = start.stream_cut
    if isinstance(start, StreamCut):
        mine = {name: offset for name, offset in start.positions.items()
                if name.startswith(f"{topic}/")}
        if not mine:
            raise InvalidArgumentError(
                f"the cut names no segment of topic {topic!r} (its topics: {start.topics})")
        start = mine
    positions: dict[str, int]
    if start == "earliest":
        positions = {s.name: s.start_offset for s in every if not s.predecessors}
    elif start == "latest":
        positions = {s.name: s.end_offset for s in segments}
    elif isinstance(start, Mapping):
        for name, offset in start.items():
            if not name.startswith(f"{topic}/"):
                raise InvalidArgumentError(
                    f"segment {name!r} is not a segment of topic {topic!r}")
            if offset < 0:
                raise InvalidArgumentError(f"offset {offset} of {name!r} is negative")
        # A successor of a named segment (sealed) is not started now but once
        # its predecessors are read to their end, as the reader follows scaling:
        # started at once it would be read alongside them, out of write order.
        later = _descendants(every, start) - set(start)
        positions = {s.name: s.start_offset for s in segments if s.name not in later}
        positions.update(start)
        # Its predecessors the mapping leaves out lie outside the start: they
        # start at their end (finished at once), so the successor does not wait
        # for them forever.
        before = ancestors(every, start)
        by_name = {s.name: s for s in every}
        for name in later:
            for predecessor in by_name[name].predecessors:
                if predecessor in by_name and predecessor not in {*positions, *later, *before}:
                    positions[predecessor] = by_name[predecessor].end_offset
    else:
        raise InvalidArgumentError(
            f"start must be 'earliest', 'latest', a StreamCut, a Checkpoint or a mapping of "
            f"segment to offset, not {start!r}")
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


def _descendants(segments: list[SegmentRange], of: Collection[str]) -> set[str]:
    """The names of every successor, transitively, of the segments named in ``of``."""
    successors = {s.name: s.successors for s in segments}
    found: set[str] = set()
    todo = [n for name in of for n in successors.get(name, ())]
    while todo:
        name = todo.pop()
        if name not in found:
            found.add(name)
            todo.extend(successors.get(name, ()))
    return found
