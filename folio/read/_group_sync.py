"""Small pieces of a group reader's state changes, apart from ``folio.read.groups``."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from folio._transport.segment_streams import SegmentStreams
from folio.errors import ReaderGroupNotEmptyError
from folio.read._group_state import GroupState, Successor

__all__ = ["Synced", "apply_synced", "join", "leave", "replace_state", "reset_to",
           "sync_change"]


@dataclass(slots=True)
class Synced:
    """What one sync of a group reader did to its segments (``GroupReader._sync``)."""

    checkpoint: str | None = None
    released: dict[str, int] = field(default_factory=dict)
    finished: list[str] = field(default_factory=list)
    acquired: dict[str, int] = field(default_factory=dict)
    missing: dict[str, int] = field(default_factory=dict)
    extra: list[str] = field(default_factory=list)


def join(state: GroupState, reader_id: str, session: str) -> int:
    """Adds the reader to ``state``; the group's session timeout, in ms."""
    state.add_reader(reader_id, session)
    return state.session_timeout_ms


def reset_to(current: GroupState, fresh: GroupState, only_if_empty: bool) -> None:
    """``ReaderGroup.reset``'s change: ``fresh``'s start, refused while members are online
    if ``only_if_empty`` (checked in the same compare-and-set)."""
    if only_if_empty and current.readers:
        raise ReaderGroupNotEmptyError(
            f"reader group {current.group!r} has members online: "
            f"{', '.join(sorted(current.readers))}; stop them first (a dead member "
            f"is declared offline after the session timeout, or declare it offline "
            f"now with reader_offline)", group=current.group,
            members=sorted(current.readers))
    replace_state(current, fresh)


def replace_state(current: GroupState, fresh: GroupState) -> None:
    """Resets ``current`` to ``fresh``'s start, dropping members and pending checkpoints."""
    current.readers, current.unassigned = {}, dict(fresh.unassigned)
    current.sessions = {}
    current.future, current.finished = dict(fresh.future), set(fresh.finished)
    current.pending = []


def sync_change(state: GroupState, me: str, session: str, finished: Sequence[str],
                successors: Mapping[str, list[Successor]], positions: dict[str, int],
                reading: Collection[str] | None) -> Synced:
    """One sync of reader ``me`` applied to ``state`` (a group reader's compare-and-set
    change, both faces): a pending checkpoint first, else hand finished segments over,
    take free ones, or give back excess. ``reading``: the segments it reads, when an
    earlier sync's outcome was unknown (reconcile with what the state says it holds).
    """
    synced = _transition(state, me, session, finished, successors, positions)
    if reading is not None:
        # An earlier update may have been applied although its reply was
        # lost: read what the state says this reader holds, no more.
        now_held = state.held(me)
        synced.missing = {s: o for s, o in now_held.items()
                          if s not in reading and s not in synced.acquired}
        synced.extra = [s for s in reading if s not in now_held and
                        s not in synced.released and s not in synced.finished]
    return synced


def _transition(state: GroupState, me: str, session: str, finished: Sequence[str],
                successors: Mapping[str, list[Successor]],
                positions: dict[str, int]) -> Synced:
    state.check_session(me, session)
    held = state.held(me)
    synced = Synced()
    name = state.checkpoint_for(me)
    if name is not None:
        synced.checkpoint = name
        synced.released = state.pass_checkpoint(me, name, positions)
        return synced
    for segment in finished:
        if segment in held:  # else no longer ours: nothing to hand over
            state.finish_segment(me, segment, successors[segment])
        synced.finished.append(segment)
    synced.acquired = state.acquire(me)
    if not synced.acquired:
        synced.released = state.rebalance(me, positions)
    return synced


def apply_synced(synced: Synced, streams: SegmentStreams[Any], finished: set[str]) -> None:
    """Makes ``streams`` read what ``synced`` says the reader holds now."""
    finished.difference_update(synced.finished, synced.released, synced.extra)
    for segment in (*synced.released, *synced.finished, *synced.extra):
        streams.remove(segment)
    for segment, offset in (*synced.acquired.items(), *synced.missing.items()):
        streams.add(segment, offset)


def leave(state: GroupState, me: str, session: str, positions: dict[str, int]) -> None:
    """Reader ``me`` leaves, its segments handed back at ``positions`` (``close``)."""
    state.check_session(me, session)
    state.remove_reader(me, positions)
