"""Where a new (or reset) reader group starts: its first state from a start point.

``"earliest"``, ``"latest"``, a ``StreamCut`` (or mapping of segment to offset)
or a ``Checkpoint``; the cut's segments are checked against the topics'
segment graphs, and segments before the cut that a later successor may still
name as a predecessor are marked finished.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Literal

from folio.errors import InvalidArgumentError
from folio.models import SegmentRange
from folio.read._group_state import GroupState
from folio.read.cuts import Checkpoint, StreamCut

if TYPE_CHECKING:
    from folio.read.catalog import SegmentCatalog

__all__ = ["GroupStart", "initial_state"]

#: Where a new group starts.
GroupStart = Literal["earliest", "latest"] | StreamCut | Checkpoint | Mapping[str, int]


def initial_state(client: SegmentCatalog, name: str, topics: Sequence[str],
                  start: GroupStart) -> GroupState:
    """The first state of a group reading ``topics`` from ``start``."""
    if isinstance(start, Checkpoint):
        if sorted(set(start.topics)) != sorted(set(topics)):
            raise InvalidArgumentError(f"the checkpoint covers topics {list(start.topics)}, "
                                       f"not {sorted(set(topics))}")
        return GroupState.starting_at(name, topics, start.positions, start.future)
    if start in ("earliest", "latest"):
        positions: dict[str, int] = {}
        for topic in topics:
            if start == "latest":
                positions.update({s.name: s.end_offset for s in client.get_segments(topic)})
            else:
                every = client.get_segments(topic, include_sealed=True)
                positions.update({s.name: s.start_offset for s in every if not s.predecessors})
        return GroupState.starting_at(name, topics, positions)
    if isinstance(start, Mapping):
        start = StreamCut(start)
    if not isinstance(start, StreamCut):
        raise InvalidArgumentError(
            f"start must be 'earliest', 'latest', a StreamCut, a Checkpoint or a mapping "
            f"of segment to offset, not {start!r}")
    wanted = set(topics)
    extra = sorted(set(start.topics) - wanted)
    if extra:
        raise InvalidArgumentError(f"the cut names segments of other topics: {extra}")
    positions = dict(start.positions)
    finished: set[str] = set()
    for topic in topics:
        graph = {s.name: s for s in client.get_segments(topic, include_sealed=True)}
        mine = [s for s in positions if s.rsplit("/", 1)[0] == topic]
        if not mine:
            # A topic the cut leaves out starts at its first segments.
            positions.update({s.name: s.start_offset for s in graph.values()
                              if not s.predecessors})
            continue
        unknown = sorted(set(mine) - set(graph))
        if unknown:
            raise InvalidArgumentError(f"the cut names segments {topic!r} does not have: "
                                       f"{unknown}")
        finished |= _dangling_ancestors(mine, graph)
        added, outside = _left_out(mine, graph)
        positions.update(added)
        finished |= outside
    return GroupState.starting_at(name, topics, positions, finished=finished)


def _left_out(cut: Sequence[str], every: Mapping[str, SegmentRange]
              ) -> tuple[dict[str, int], set[str]]:
    """What a cut naming only part of a topic leaves out, as ``Client.reader`` sees it.

    Active segments neither named nor after a named one start at their first
    event (the SDK's and ``folio consume --from-offset``'s rule for segments a
    start does not name); sealed predecessors of a successor of the cut that
    the cut leaves out lie outside it and count as finished, so that successor
    is handed out once the named segments before it are read. A cut covering
    the key space (a checkpoint's, say) leaves nothing out: both are empty.
    """
    named = set(cut)
    later: set[str] = set()
    todo = [s for name in cut for s in every[name].successors]
    while todo:
        segment = todo.pop()
        if segment not in later and segment in every:
            later.add(segment)
            todo.extend(every[segment].successors)
    later -= named
    before: set[str] = set()
    todo = [p for name in cut for p in every[name].predecessors]
    while todo:
        segment = todo.pop()
        if segment not in before and segment in every:
            before.add(segment)
            todo.extend(every[segment].predecessors)
    added = {s.name: s.start_offset for s in every.values()
             if not s.sealed and s.name not in named | later}
    outside = {p for name in later for p in every[name].predecessors
               if p in every and p not in named | later | before}
    return added, outside


def _dangling_ancestors(cut: Sequence[str], every: Mapping[str, SegmentRange]) -> set[str]:
    """Segments before the cut that a successor after it may still name as a predecessor."""
    ancestors: set[str] = set()
    todo = list(cut)
    while todo:
        for predecessor in every[todo.pop()].predecessors:
            if predecessor not in ancestors:
                ancestors.add(predecessor)
                todo.append(predecessor)
    inside = ancestors | set(cut)
    return {a for a in ancestors if any(s not in inside for s in every[a].successors)}
