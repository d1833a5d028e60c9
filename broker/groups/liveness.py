"""Reader group liveness: members heartbeat; the broker declares silent ones offline.

Reader groups are otherwise changed only by their clients (compare-and-set of
the state, ``broker.groups.store``), but a member that dies without closing
(SIGKILL, a lost machine) cannot hand its segments back, so the broker does it
for it, as Kafka's group coordinator does. This module is that one rule, on
the protobuf state (the broker does not import the SDK):

- ``Heartbeat(group, reader_id, session_id, positions)`` records, in memory,
  when the member was last heard from and the offsets it reported (the first
  event its application has not processed yet, per segment held). No state
  update: a heartbeat costs one metadata read.
- A sweep, every ``sweep_interval_s``, reads the state of every group whose
  first member could have passed its timeout by then (so a group is read
  about once per timeout, not every round). A member not
  heard from for the group's session timeout is removed from the state by
  compare-and-set (``declare_offline``): each segment it held is freed at the
  greater of its recorded offset and the offset it last reported in its
  current session, and it stands in for itself in pending checkpoints with
  those offsets, exactly as a reader leaving does. The others take the freed
  segments at their next sync.

Why at-least-once holds and nothing is skipped: a reported offset only
covers events the application had processed, and a recorded offset is never
beyond what the holder read (it is where the holder took the segment or
passed a checkpoint), so every event after the freed offset is read again by
the next holder. The greater of the two is safe because a segment's offsets
only move forward from one holder to the next, and reports of an earlier
session (before the id was taken over) are never used (``session_id``).

Crash windows: heartbeats live in this process only. After a broker restart
(or before a member's first heartbeat) a member is timed from when the
broker first saw it in the state, so it gets a whole session timeout to
heartbeat again; if it does not, its segments are freed at the offsets the
state recorded, which repeats more events but skips none. A sweep that loses
its compare-and-set to a client's update is simply tried again next round.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final

from broker.errors import BrokerError, GroupStateConflictError, ReaderGroupNotFoundError
from broker.groups.heartbeats import HeartbeatBoard
from broker.groups.store import ReaderGroupStore, session_timeout_ms
from broker.metrics import count_member_offline
from folio.api.v1 import groups_pb2
from ledger.errors import LedgerError
from ledger.tasks import cancel_and_wait

__all__ = ["MAX_COMPLETED_CHECKPOINTS", "GroupLiveness", "MemberView", "declare_offline"]

log = logging.getLogger(__name__)

#: Completed checkpoints a state keeps (as the SDK does).
MAX_COMPLETED_CHECKPOINTS: Final = 16
#: How often silent members are looked for: a member is declared offline at
#: most this much after its session timeout passed.
DEFAULT_SWEEP_INTERVAL_S: Final = 0.25


def _offsets(offsets: Mapping[str, int]) -> list[groups_pb2.SegmentOffset]:
    return [groups_pb2.SegmentOffset(segment=s, offset=o) for s, o in sorted(offsets.items())]


def declare_offline(group: str, state: groups_pb2.ReaderGroupState, reader_id: str,
                    reported: Mapping[str, int]) -> dict[str, int] | None:
    """Remove ``reader_id`` from ``state`` (in place) as if it had left; None if not a member.

    Each segment it held is freed at the greater of its recorded offset and
    ``reported`` (the offsets it last heartbeated), and it passes the pending
    checkpoints it was holding up with those offsets (completing those that
    waited only for it). Returns the freed segments and offsets.
    """
    index = next((i for i, member in enumerate(state.readers) if member.reader_id == reader_id),
                 None)
    if index is None:
        return None
    freed = {held.segment: max(held.offset, reported.get(held.segment, held.offset))
             for held in state.readers[index].segments}
    del state.readers[index]
    unassigned = {free.segment: free.offset for free in state.unassigned}
    unassigned.update(freed)
    del state.unassigned[:]
    state.unassigned.extend(_offsets(unassigned))
    still_pending = []
    for was in state.pending_checkpoints:
        pending = groups_pb2.PendingCheckpoint()
        pending.CopyFrom(was)
        if reader_id in pending.waiting_readers:
            offsets = {p.segment: p.offset for p in pending.positions}
            offsets.update(freed)
            waiting = [r for r in pending.waiting_readers if r != reader_id]
            del pending.waiting_readers[:], pending.positions[:]
            pending.waiting_readers.extend(waiting)
            pending.positions.extend(_offsets(offsets))
        if pending.waiting_readers:
            still_pending.append(pending)
        else:
            state.completed_checkpoints.append(groups_pb2.Checkpoint(
                group=group, name=pending.name, positions=pending.positions,
                future=sorted(pending.future, key=lambda f: f.segment), topics=state.topics))
    del state.pending_checkpoints[:]
    state.pending_checkpoints.extend(still_pending)
    del state.completed_checkpoints[:-MAX_COMPLETED_CHECKPOINTS]
    return freed


@dataclass(slots=True)
class _Heard:
    """What the broker knows of one member's liveness."""

    session_id: str
    heard_s: float
    heartbeated: bool = False
    offsets: dict[str, int] = field(default_factory=dict)
    #: The version of its shared heartbeat node last seen (cluster), -1: none.
    shared_version: int = -1


@dataclass(frozen=True, slots=True)
class MemberView:
    """A member's liveness for ``GetMembers``."""

    reader_id: str
    session_id: str
    silent_ms: int
    heartbeated: bool
    reported: dict[str, int]


class GroupLiveness:
    """Heartbeats of every group's members, and the sweep that declares silent ones offline."""

    def __init__(self, groups: ReaderGroupStore, *,
                 sweep_interval_s: float = DEFAULT_SWEEP_INTERVAL_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if sweep_interval_s <= 0:
            raise ValueError(f"sweep_interval_s must be > 0, not {sweep_interval_s}")
        self._groups = groups
        self._interval_s = sweep_interval_s
        self._clock = clock
        self._heard: dict[str, dict[str, _Heard]] = {}
        #: When each group's state must be read again: when its first member
        #: could pass its timeout (a group is not read every round).
        self._next_check: dict[str, float] = {}
        self._task: asyncio.Task[None] | None = None
        self._board: HeartbeatBoard | None = None
        self._sweeps: Callable[[str], bool] = lambda group: True

    def share(self, board: HeartbeatBoard, sweeps: Callable[[str], bool]) -> None:
        """Cluster mode: heartbeats go to ``board`` too; sweep only the groups ``sweeps`` names.

        Exactly one broker should sweep a group (the owner of its container), and
        it learns of heartbeats other brokers received from the board.
        """
        self._board = board
        self._sweeps = sweeps

    def _entry(self, group: str, member: groups_pb2.ReaderAssignment, now: float) -> _Heard:
        """The member's entry; a new session (or a first sight) starts its clock now."""
        members = self._heard.setdefault(group, {})
        entry = members.get(member.reader_id)
        if entry is None or entry.session_id != member.session_id:
            entry = members[member.reader_id] = _Heard(member.session_id, now)
        return entry

    async def heartbeat(self, group: str, reader_id: str, session_id: str,
                        offsets: Mapping[str, int]) -> tuple[bool, int]:
        """Record that the member is alive; returns (still a member, session timeout ms).

        Raises ``ReaderGroupNotFoundError``.
        """
        record = await self._groups.get(group)
        timeout_ms = session_timeout_ms(record.state)
        member = next((m for m in record.state.readers if m.reader_id == reader_id), None)
        if member is None or member.session_id != session_id:
            return False, timeout_ms
        entry = self._entry(group, member, self._clock())
        entry.heard_s = self._clock()
        entry.heartbeated = True
        held = {s.segment for s in member.segments}
        entry.offsets = {s: o for s, o in offsets.items() if s in held}
        if self._board is not None:
            await self._board.write(group, reader_id, session_id, entry.offsets)
        return True, timeout_ms

    def reported(self, group: str, state: groups_pb2.ReaderGroupState) -> dict[str, int]:
        """The offsets the members of ``state`` last reported, per held segment (this session)."""
        heard = self._heard.get(group, {})
        reported: dict[str, int] = {}
        for member in state.readers:
            entry = heard.get(member.reader_id)
            if entry is not None and entry.session_id == member.session_id:
                held = {s.segment for s in member.segments}
                reported.update((s, o) for s, o in entry.offsets.items() if s in held)
        return reported

    async def members(self, group: str) -> tuple[int, list[MemberView]]:
        """The group's session timeout and its members' liveness. ``ReaderGroupNotFoundError``."""
        record = await self._groups.get(group)
        now = self._clock()
        views = []
        for member in record.state.readers:
            entry = self._entry(group, member, now)
            views.append(MemberView(member.reader_id, member.session_id,
                                    round((now - entry.heard_s) * 1000), entry.heartbeated,
                                    dict(entry.offsets)))
        return session_timeout_ms(record.state), views

    async def sweep(self) -> list[tuple[str, str]]:
        """Declare every member silent past its group's timeout offline; returns (group, reader)."""
        declared: list[tuple[str, str]] = []
        names = await self._groups.names()
        for gone in set(self._heard) - set(names):
            del self._heard[gone]
        for gone in set(self._next_check) - set(names):
            del self._next_check[gone]
        now = self._clock()
        for name in names:
            if self._next_check.get(name, now) > now or not self._sweeps(name):
                continue
            try:
                declared += await self._sweep_group(name)
            except ReaderGroupNotFoundError:
                self._heard.pop(name, None)  # deleted meanwhile
            except GroupStateConflictError:
                self._next_check.pop(name, None)  # read it again next round
                log.info("group %s changed while declaring members offline; next round", name)
        return declared

    async def _sweep_group(self, name: str) -> list[tuple[str, str]]:
        record = await self._groups.get(name)
        now = self._clock()
        timeout_s = session_timeout_ms(record.state) / 1000
        members = {m.reader_id: self._entry(name, m, now) for m in record.state.readers}
        self._heard[name] = members  # forgets members that left
        if self._board is not None:
            await self._heard_elsewhere(name, record.state, members, now)
        silent = sorted(r for r, entry in members.items() if now - entry.heard_s > timeout_s)
        # Read it again when the first live member could pass its timeout (a
        # heartbeat meanwhile only makes that read early). A member that joins
        # meanwhile is timed from its first heartbeat, or from that next read.
        left_s = min((entry.heard_s + timeout_s - now for r, entry in members.items()
                      if r not in silent), default=timeout_s / 2)
        next_check = now + max(self._interval_s, left_s)
        if not silent:
            self._next_check[name] = next_check
            return []
        state = groups_pb2.ReaderGroupState()
        state.CopyFrom(record.state)
        for reader_id in silent:
            freed = declare_offline(name, state, reader_id, members[reader_id].offsets)
            log.warning("reader group %s: member %s silent for over %d ms, declared offline; "
                        "its segments are free at %s", name, reader_id,
                        session_timeout_ms(state), freed)
        await self._groups.update(name, record.version, state)
        self._next_check[name] = next_check  # only once done: a failure retries next round
        for reader_id in silent:
            members.pop(reader_id, None)
            count_member_offline(name)
        if self._board is not None:
            await self._board.forget_others(name, set(members))
        return [(name, reader_id) for reader_id in silent]

    async def _heard_elsewhere(self, name: str, state: groups_pb2.ReaderGroupState,
                               members: dict[str, _Heard], now: float) -> None:
        """Cluster: count heartbeats any broker received (their node's version moved)."""
        assert self._board is not None
        for member in state.readers:
            shared = await self._board.read(name, member.reader_id)
            entry = members[member.reader_id]
            if (shared is not None and shared.session_id == member.session_id
                    and shared.version != entry.shared_version):
                entry.shared_version = shared.version
                entry.heard_s = now
                entry.heartbeated = True
                held = {s.segment for s in member.segments}
                entry.offsets = {s: o for s, o in shared.offsets.items() if s in held}
        await self._board.forget_others(name, set(members))

    # -- the background task ------------------------------------------------

    def start(self) -> None:
        """Start sweeping in the background (on the running event loop)."""
        if self._task is None:
            self._task = asyncio.create_task(self._sweep_forever(), name="group-liveness")

    async def close(self) -> None:
        """Stop sweeping."""
        task, self._task = self._task, None
        if task is not None:
            await cancel_and_wait(task)

    async def _sweep_forever(self) -> None:
        while True:
            await asyncio.sleep(self._interval_s)
            try:
                await self.sweep()
            except (BrokerError, LedgerError) as error:
                log.warning("reader group liveness sweep failed: %s", error)
            except Exception:
                log.exception("reader group liveness sweep failed")
