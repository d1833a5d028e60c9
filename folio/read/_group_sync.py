"""Small pieces of a group reader's state changes, apart from ``folio.read.groups``."""

from __future__ import annotations

from dataclasses import dataclass, field

from folio.read._group_state import GroupState

__all__ = ["Synced", "join", "replace_state"]


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


def replace_state(current: GroupState, fresh: GroupState) -> None:
    """Resets ``current`` to ``fresh``'s start, dropping members and pending checkpoints."""
    current.readers, current.unassigned = {}, dict(fresh.unassigned)
    current.sessions = {}
    current.future, current.finished = dict(fresh.future), set(fresh.finished)
    current.pending = []
