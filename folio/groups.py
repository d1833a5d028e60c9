"""Reader groups: readers that share topics' segments, with checkpoints and positions.

``Client.reader_group(name, topics, start=...)`` creates (or opens) a group
whose state lives in the broker (``ReaderGroups`` service) and changes only by
compare-and-set (``folio._group_state`` holds the rules). Each
``group.reader(reader_id)`` is a :class:`GroupReader`: it holds some segments
— an even share — and reads them; ``read_next(timeout_ms)`` returns an
:class:`EventRead` carrying the event and the reader's position after it, or
a checkpoint event. A successor segment (after scaling) is handed out only
once all its predecessors were read to their end, so the events of one
routing key come in the order they were written, across scaling and across
readers.

A reader syncs with the group state every ``sync_interval_ms`` (and at once
when one of its segments ends): it passes pending checkpoints first (recording
its offsets and giving back segments beyond its fair share — the rebalancing
the seed describes), then hands finished segments over to their successors,
then takes free segments up to its share.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from folio._group_state import GroupState, Successor
from folio._segment_streams import SegmentStreams
from folio.api.v1 import groups_pb2, read_pb2
from folio.cuts import Checkpoint, Position, StreamCut
from folio.errors import (
    FolioError,
    GroupStateConflictError,
    InvalidArgumentError,
    ReaderGroupExistsError,
    ReaderGroupNotFoundError,
    ReaderNotInGroupError,
    TimeoutError,
)
from folio.models import Event, SegmentRange
from folio.serializers import BytesSerializer, Serializer

if TYPE_CHECKING:
    from folio._io import IoThread
    from folio._pool import ReadChannels
    from folio.api.v1.groups_pb2_grpc import ReaderGroupsAsyncStub
    from folio.client import Client

__all__ = ["EventRead", "GroupReader", "GroupStart", "ReaderGroup"]

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")

#: Where a new group starts.
GroupStart = Literal["earliest", "latest"] | StreamCut | Checkpoint | Mapping[str, int]

_CAS_ATTEMPTS = 200
_DEFAULT_SYNC_MS = 200
_ISOLATIONS = {
    "read_committed": read_pb2.ReadRequest.READ_COMMITTED,
    "read_uncommitted": read_pb2.ReadRequest.READ_UNCOMMITTED,
}


class EventRead(Generic[T]):
    """What ``GroupReader.read_next`` returns: an event, or a checkpoint event.

    Attributes:
        event: the event, or None for a checkpoint event.
        checkpoint_name: the checkpoint's name for a checkpoint event, else None.
    """

    __slots__ = ("_positions", "_reader", "checkpoint_name", "event")

    def __init__(self, event: Event[T] | None, reader: str, positions: dict[str, int],
                 checkpoint_name: str | None = None) -> None:
        self.event = event
        self.checkpoint_name = checkpoint_name
        self._reader = reader
        self._positions = positions

    @property
    def is_checkpoint(self) -> bool:
        """Whether this is a checkpoint event (no ``event``)."""
        return self.checkpoint_name is not None

    @property
    def position(self) -> Position:
        """The reader's position just after this event (every segment it holds)."""
        return Position(self._reader, self._positions)

    def __repr__(self) -> str:
        if self.checkpoint_name is not None:
            return f"EventRead(checkpoint={self.checkpoint_name!r})"
        return f"EventRead({self.event!r})"


@dataclass(slots=True)
class _Synced:
    checkpoint: str | None = None
    released: dict[str, int] = field(default_factory=dict)
    finished: list[str] = field(default_factory=list)
    acquired: dict[str, int] = field(default_factory=dict)


class _GroupClient:
    """The ``ReaderGroups`` calls of one client, blocking and async."""

    def __init__(self, client: Client, call: Callable[..., Any],
                 unary: Callable[..., Awaitable[Any]], io: IoThread,
                 channels: ReadChannels, stub: ReaderGroupsAsyncStub) -> None:
        self.client = client
        self.call = call
        self.unary = unary
        self.io = io
        self.channels = channels
        self.stub = stub

    def get(self, name: str) -> tuple[int, GroupState]:
        reply = self.call(self.stub.GetReaderGroup, groups_pb2.GetReaderGroupRequest(name=name),
                          retry=True)
        return reply.version, GroupState.from_proto(name, reply.state)

    def cas(self, name: str, change: Callable[[GroupState], R]) -> R:
        """Apply ``change`` to the latest state and write it back by compare-and-set."""
        for _ in range(_CAS_ATTEMPTS):
            version, state = self.get(name)
            changed = state.copy()
            result = change(changed)
            if changed == state:
                return result
            request = groups_pb2.UpdateReaderGroupRequest(
                name=name, expected_version=version, state=changed.to_proto())
            try:
                self.call(self.stub.UpdateReaderGroup, request)
            except GroupStateConflictError:
                continue
            return result
        raise GroupStateConflictError(f"reader group {name!r} kept changing; gave up after "
                                      f"{_CAS_ATTEMPTS} attempts")


class ReaderGroup:
    """A reader group: its readers, checkpoints and resets. Made by ``Client.reader_group``."""

    def __init__(self, name: str, calls: _GroupClient, *,
                 sync_interval_ms: int = _DEFAULT_SYNC_MS) -> None:
        self.name = name
        self._calls = calls
        self._sync_interval_ms = sync_interval_ms

    # -- made by the client -------------------------------------------------

    @classmethod
    def open(cls, name: str, calls: _GroupClient, topics: Sequence[str] | None,
             start: GroupStart, sync_interval_ms: int) -> ReaderGroup:
        """Create the group at ``start``, or open it if it exists (topics must then match)."""
        if sync_interval_ms <= 0:
            raise InvalidArgumentError(f"sync_interval_ms must be > 0, not {sync_interval_ms}")
        group = cls(name, calls, sync_interval_ms=sync_interval_ms)
        if topics is None:
            calls.get(name)  # ReaderGroupNotFoundError
            return group
        if isinstance(topics, str) or not topics:
            raise InvalidArgumentError("topics must be a non-empty list of topic names")
        state = initial_state(calls.client, name, topics, start)
        request = groups_pb2.CreateReaderGroupRequest(name=name, state=state.to_proto())
        try:
            calls.call(calls.stub.CreateReaderGroup, request)
        except ReaderGroupExistsError:
            _, existing = calls.get(name)
            if sorted(existing.topics) != sorted(set(topics)):
                raise InvalidArgumentError(
                    f"reader group {name!r} exists and reads {existing.topics}, not "
                    f"{sorted(set(topics))}") from None
        return group

    # -- readers ------------------------------------------------------------

    def reader(self, reader_id: str, serializer: Serializer[Any] | None = None, *,
               isolation: str = "read_committed") -> GroupReader[Any]:
        """A new member of the group, reading its share of the segments.

        Raises:
            InvalidArgumentError: ``reader_id`` is a member already (a crashed
                reader must be declared offline first) or empty.
            ReaderGroupNotFoundError: the group was deleted.
        """
        if isolation not in _ISOLATIONS:
            raise InvalidArgumentError(
                f"isolation must be 'read_committed' or 'read_uncommitted', not {isolation!r}")
        self._calls.cas(self.name, lambda state: state.add_reader(reader_id))
        return GroupReader(self, reader_id, serializer or BytesSerializer(),
                           _ISOLATIONS[isolation], self._sync_interval_ms)

    def reader_offline(self, reader_id: str, last_position: Position | None = None) -> None:
        """Declares a reader gone; its segments go back to the pool.

        Args:
            reader_id: the reader.
            last_position: the position of the last event it processed (from
                ``EventRead.position``); its segments are read again from
                there, so nothing after it is read twice. None: from the
                offsets the group recorded (its last checkpoint or when it
                took them), which may repeat events.

        Raises:
            ReaderNotInGroupError: no such member.
            InvalidArgumentError: the position is another reader's.
        """
        if last_position is not None and last_position.reader_id != reader_id:
            raise InvalidArgumentError(f"the position is reader {last_position.reader_id!r}'s, "
                                       f"not {reader_id!r}'s")
        positions = None if last_position is None else dict(last_position.positions)
        self._calls.cas(self.name, lambda state: state.remove_reader(reader_id, positions))

    def online_readers(self) -> list[str]:
        """The members now, sorted."""
        return sorted(self._calls.get(self.name)[1].readers)

    def assignment(self) -> dict[str, list[str]]:
        """Reader -> the segments it holds now (``""`` -> free segments)."""
        _, state = self._calls.get(self.name)
        held = {reader: sorted(segments) for reader, segments in state.readers.items()}
        held[""] = sorted(state.unassigned)
        return held

    def waiting_segments(self) -> dict[str, list[str]]:
        """Successors waiting -> the predecessors they still wait for."""
        _, state = self._calls.get(self.name)
        return {name: list(f.waiting_for) for name, f in state.future.items()}

    # -- checkpoints and resets ---------------------------------------------

    def initiate_checkpoint(self, name: str, timeout_s: float | None = None
                            ) -> concurrent.futures.Future[Checkpoint]:
        """Starts checkpoint ``name``; the future completes when every reader passed it.

        Readers pass it in their ``read_next`` calls (each returns a
        checkpoint event), so they must keep reading. The future fails with
        ``TimeoutError`` after ``timeout_s`` (None: no limit).

        Raises:
            InvalidArgumentError: the name is empty or used already.
        """
        self._calls.cas(self.name, lambda state: state.initiate_checkpoint(name))
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        return self._calls.io.submit(self._await_checkpoint(name, deadline))

    async def _await_checkpoint(self, name: str, deadline: float | None) -> Checkpoint:
        delay = 0.01
        request = groups_pb2.GetReaderGroupRequest(name=self.name)
        while True:
            reply = await self._calls.unary(self._calls.stub.GetReaderGroup, request, retry=True)
            state = GroupState.from_proto(self.name, reply.state)
            done = state.completed_checkpoint(name)
            if done is not None:
                return done
            if all(p.name != name for p in state.pending):
                raise FolioError(f"checkpoint {name!r} of reader group {self.name!r} is gone "
                                 "(the group was reset, or later checkpoints pushed it out)")
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"checkpoint {name!r} of reader group {self.name!r} not "
                                   "passed by every reader in time")
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.25)

    def checkpoints(self) -> list[Checkpoint]:
        """The latest completed checkpoints, oldest first."""
        return list(self._calls.get(self.name)[1].completed)

    def reset(self, start: GroupStart) -> None:
        """Starts the group over at ``start``; every reader is dropped from it.

        Its readers fail with ``ReaderNotInGroupError`` at their next sync;
        make new ones.
        """
        _, state = self._calls.get(self.name)
        fresh = initial_state(self._calls.client, self.name, state.topics, start)
        self._calls.cas(self.name, lambda current: _replace(current, fresh))

    def delete(self) -> None:
        """Deletes the group. ``ReaderGroupNotFoundError``."""
        self._calls.call(self._calls.stub.DeleteReaderGroup,
                         groups_pb2.DeleteReaderGroupRequest(name=self.name))

    def __repr__(self) -> str:
        return f"<ReaderGroup {self.name!r}>"


def _replace(current: GroupState, fresh: GroupState) -> None:
    current.readers, current.unassigned = {}, dict(fresh.unassigned)
    current.future, current.finished = dict(fresh.future), set(fresh.finished)
    current.pending = []


class GroupReader(Generic[T]):
    """One member of a reader group. Use from one thread; made by ``ReaderGroup.reader``."""

    def __init__(self, group: ReaderGroup, reader_id: str, serializer: Serializer[T],
                 isolation: read_pb2.ReadRequest.Isolation.ValueType,
                 sync_interval_ms: int) -> None:
        self.group = group
        self.reader_id = reader_id
        calls = group._calls
        self._calls = calls
        self._streams: SegmentStreams[T] = SegmentStreams(
            io=calls.io, channels=calls.channels,
            deserialize=None if isinstance(serializer, BytesSerializer) else
            serializer.deserialize, isolation=isolation)
        self._interval_s = sync_interval_ms / 1000
        self._next_sync = 0.0
        self._checkpoint: str | None = None
        #: Segments read to their end, not yet handed over in the group state.
        self._finished: set[str] = set()
        self._closed = False

    @property
    def position(self) -> Position:
        """The offset of the next event of every segment this reader holds."""
        return Position(self.reader_id, self._streams.positions())

    @property
    def segments(self) -> list[str]:
        """The segments this reader holds now."""
        return sorted(self._streams.segments)

    def read_next(self, timeout_ms: int | None = None) -> EventRead[T] | None:
        """The next event (or checkpoint event), waiting up to ``timeout_ms``.

        Returns:
            An ``EventRead``, or None when ``timeout_ms`` passed (or the
            reader is closed).

        Raises:
            ReaderNotInGroupError: the reader was declared offline, or the
                group reset; it holds nothing any more.
            ReaderGroupNotFoundError: the group was deleted.
            FolioError: a segment's stream failed for good.
        """
        deadline = None if timeout_ms is None else time.monotonic() + timeout_ms / 1000
        streams = self._streams
        while not self._closed:
            if self._checkpoint is not None:
                name, self._checkpoint = self._checkpoint, None
                return EventRead(None, self.reader_id, streams.positions(), name)
            if streams.ended:
                self._finished.update(streams.finished())
            now = time.monotonic()
            if now >= self._next_sync or self._finished:
                self._sync()
                self._next_sync = time.monotonic() + self._interval_s
                continue
            wait = self._next_sync - now
            if deadline is not None:
                wait = min(wait, deadline - now)
                if wait <= 0:
                    return None
            event = streams.next_event(wait)
            if event is not None:
                return EventRead(event, self.reader_id, streams.positions())
        return None

    def _sync(self) -> None:
        streams = self._streams
        finished = sorted(self._finished)
        successors = {segment: self._successors(segment) for segment in finished}
        positions = streams.positions()
        me = self.reader_id

        def change(state: GroupState) -> _Synced:
            held = state.held(me)
            synced = _Synced()
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
            return synced

        synced = self._calls.cas(self.group.name, change)
        self._finished.difference_update(synced.finished, synced.released)
        for segment in (*synced.released, *synced.finished):
            streams.remove(segment)
        for segment, offset in synced.acquired.items():
            streams.add(segment, offset)
        if synced.checkpoint is not None:
            self._checkpoint = synced.checkpoint
            self._next_sync = 0.0  # the rest of the sync right after the event

    def _successors(self, segment: str) -> list[Successor]:
        found: list[SegmentRange] = self._calls.client.get_successors(segment)
        return [Successor(s.name, s.start_offset, tuple(s.predecessors)) for s in found]

    def close(self) -> None:
        """Leaves the group, handing its segments back at its position. Idempotent."""
        if self._closed:
            return
        self._closed = True
        positions = self._streams.positions()
        self._streams.close()
        try:
            self._calls.cas(self.group.name,
                            lambda state: state.remove_reader(self.reader_id, positions))
        except (ReaderNotInGroupError, ReaderGroupNotFoundError):
            pass  # declared offline, or the group is gone: nothing to hand back
        except FolioError as error:
            log.warning("reader %s could not leave group %s cleanly: %s", self.reader_id,
                        self.group.name, error)

    @property
    def closed(self) -> bool:
        """Whether ``close`` was called."""
        return self._closed

    def __enter__(self) -> GroupReader[T]:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<GroupReader {self.reader_id!r} of {self.group.name!r}>"


# -- where a group starts -----------------------------------------------------


def initial_state(client: Client, name: str, topics: Sequence[str],
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
    return GroupState.starting_at(name, topics, positions, finished=finished)


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
