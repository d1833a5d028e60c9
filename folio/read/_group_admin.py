"""What ``folio group describe`` shows: a reader group's members, liveness, positions and lag.

Built from three reads: the group state (who holds which segment, at which
recorded offset), the broker's member liveness (``GetMembers``: how long each
member has been silent, the offsets it last reported) and the topics'
segments (their end offsets). A held segment's position is the greater of
its recorded and last reported offset (the one the broker would free it at if
the member died now); lag is the segment's end offset minus that position.
Also the liveness lookups ``ReaderGroup`` makes: the time left for an id in
use, and a member's last reported offsets for ``reader_offline``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from folio.api.v1 import groups_pb2
from folio.errors import ReaderIdInUseError

if TYPE_CHECKING:
    from collections.abc import Callable

    from folio.read._group_calls import _GroupClient
    from folio.read._group_state import GroupState

__all__ = ["GroupDescription", "MemberStatus", "SegmentLag", "describe_group", "description",
           "id_in_use_error", "in_use_error", "members_of", "merge_reported", "reported_positions"]


@dataclass(frozen=True, slots=True)
class SegmentLag:
    """A segment of a group: where the group is in it and how far behind its end.

    Attributes:
        segment: ``"<topic>/<number>"``.
        position: offset of the next event the group reads in it.
        end_offset: offset after its last event (None if unknown, e.g. deleted).
        lag: ``end_offset - position`` (None if unknown).
    """

    segment: str
    position: int
    end_offset: int | None
    lag: int | None

    def to_json(self) -> dict[str, Any]:
        """As a JSON object."""
        return {"segment": self.segment, "position": self.position,
                "end_offset": self.end_offset, "lag": self.lag}


@dataclass(frozen=True, slots=True)
class MemberStatus:
    """A member of a group as the broker sees it.

    Attributes:
        reader_id: its id.
        silent_ms: since the broker last heard from it (a heartbeat, or when
            the broker first saw it as a member).
        heartbeated: whether it heartbeated to this broker since it started.
        expires_in_ms: how long until it is declared offline if it stays silent.
        segments: the segments it holds.
    """

    reader_id: str
    silent_ms: int
    heartbeated: bool
    expires_in_ms: int
    segments: tuple[SegmentLag, ...]

    def to_json(self) -> dict[str, Any]:
        """As a JSON object."""
        return {"reader_id": self.reader_id, "silent_ms": self.silent_ms,
                "heartbeated": self.heartbeated, "expires_in_ms": self.expires_in_ms,
                "segments": [s.to_json() for s in self.segments]}


@dataclass(frozen=True, slots=True)
class GroupDescription:
    """A reader group now: members, free and waiting segments, lag.

    Attributes:
        name, topics, session_timeout_ms: the group's.
        members: every member, by id.
        unassigned: free segments (no member holds them).
        waiting: successors waiting for predecessors -> those predecessors.
        checkpoints: names of the completed checkpoints kept, oldest first.
        pending_checkpoints: names of checkpoints in progress.
    """

    name: str
    topics: tuple[str, ...]
    session_timeout_ms: int
    members: tuple[MemberStatus, ...]
    unassigned: tuple[SegmentLag, ...]
    waiting: dict[str, list[str]]
    checkpoints: tuple[str, ...]
    pending_checkpoints: tuple[str, ...]

    @property
    def lag(self) -> int:
        """Events the group has yet to read in its held and free segments (known ends)."""
        every = [*self.unassigned, *(s for m in self.members for s in m.segments)]
        return sum(s.lag or 0 for s in every)

    def to_json(self) -> dict[str, Any]:
        """As a JSON object (``folio group describe --json``)."""
        return {"name": self.name, "topics": list(self.topics),
                "session_timeout_ms": self.session_timeout_ms, "lag": self.lag,
                "members": [m.to_json() for m in self.members],
                "unassigned": [s.to_json() for s in self.unassigned],
                "waiting": self.waiting, "checkpoints": list(self.checkpoints),
                "pending_checkpoints": list(self.pending_checkpoints)}


def members_of(calls: _GroupClient, name: str) -> groups_pb2.GetMembersResponse:
    """The broker's view of the group's members. ``ReaderGroupNotFoundError``."""
    reply: groups_pb2.GetMembersResponse = calls.call(
        calls.stub.GetMembers, groups_pb2.GetMembersRequest(name=name), retry=True)
    return reply


def describe_group(calls: _GroupClient, name: str) -> GroupDescription:
    """The group now. ``ReaderGroupNotFoundError``."""
    _, state = calls.get(name)
    liveness = members_of(calls, name)
    ends: dict[str, int] = {}
    for topic in state.topics:
        ends.update((s.name, s.end_offset)
                    for s in calls.client.get_segments(topic, include_sealed=True))
    return description(name, state, liveness, ends)


def description(name: str, state: GroupState, liveness: groups_pb2.GetMembersResponse,
                ends: dict[str, int]) -> GroupDescription:
    """``describe_group`` from what it read: the state, the members' view, segment ends."""
    def lag(segment: str, position: int) -> SegmentLag:
        end = ends.get(segment)
        return SegmentLag(segment, position, end, None if end is None else max(0, end - position))

    members = []
    timeout_ms = liveness.session_timeout_ms
    seen = {m.reader_id: m for m in liveness.members}
    for reader, held in sorted(state.readers.items()):
        member = seen.get(reader)
        reported = {} if member is None else {p.segment: p.offset
                                              for p in member.reported_positions}
        silent_ms = 0 if member is None else member.silent_ms
        members.append(MemberStatus(
            reader, silent_ms, member is not None and member.heartbeated,
            max(0, timeout_ms - silent_ms),
            tuple(lag(s, max(o, reported.get(s, o))) for s, o in sorted(held.items()))))
    return GroupDescription(
        name, tuple(state.topics), timeout_ms, tuple(members),
        tuple(lag(s, o) for s, o in sorted(state.unassigned.items())),
        {s: list(f.waiting_for) for s, f in sorted(state.future.items())},
        tuple(c.name for c in state.completed), tuple(p.name for p in state.pending))


def id_in_use_error(calls: _GroupClient, name: str, reader_id: str,
                    error: ReaderIdInUseError) -> ReaderIdInUseError:
    """``error`` with how long the member holding the id has been silent."""
    return in_use_error(members_of(calls, name), name, reader_id, error)


def in_use_error(liveness: groups_pb2.GetMembersResponse, name: str, reader_id: str,
                 error: ReaderIdInUseError) -> ReaderIdInUseError:
    """``id_in_use_error`` from the members' view."""
    member = next((m for m in liveness.members if m.reader_id == reader_id), None)
    if member is None:
        return error
    left_ms = max(0, liveness.session_timeout_ms - member.silent_ms)
    return ReaderIdInUseError(
        f"reader {reader_id!r} is already a member of reader group {name!r} (last "
        f"heard from {member.silent_ms} ms ago); if it died, the broker declares it "
        f"offline after {liveness.session_timeout_ms} ms of silence (in about "
        f"{left_ms} ms), then the id is free; or declare it offline now "
        f"(reader_offline, `folio group offline {name} {reader_id}`)",
        reader_id=reader_id, group=name, silent_ms=member.silent_ms,
        session_timeout_ms=liveness.session_timeout_ms)


def reported_positions(calls: _GroupClient, name: str,
                       reader_id: str) -> dict[str, int] | None:
    """The offsets ``reader_id`` last heartbeated, where beyond the recorded ones."""
    return merge_reported(members_of(calls, name), lambda: calls.get(name)[1], reader_id)


def merge_reported(members: groups_pb2.GetMembersResponse, state: Callable[[], GroupState],
                   reader_id: str) -> dict[str, int] | None:
    """``reported_positions`` from the members' view (``state``: read only when needed)."""
    member = next((m for m in members.members if m.reader_id == reader_id), None)
    if member is None or not member.reported_positions:
        return None
    recorded = state().readers.get(reader_id, {})
    return {p.segment: max(p.offset, recorded.get(p.segment, p.offset))
            for p in member.reported_positions}
