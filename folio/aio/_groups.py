"""The asyncio reader groups: ``folio.read.groups``' group state and rules, on the caller's loop.

An :class:`AsyncReaderGroup` (``AsyncClient.reader_group``) and its
:class:`AsyncGroupReader` members use the blocking face's parts: the group
state changes by ``_GroupClient.cas_async`` (the compare-and-set loop the
blocking face runs on its IO thread), a sync is ``_group_sync.sync_change``
(the same change both faces apply), the heartbeat is ``Heartbeat`` as a task
of the loop, and the segments are read by ``SegmentStreams`` whose queue
signals an ``asyncio.Event`` (as ``AsyncEventReader``). ``read`` takes with
``next_event(0)``, which never waits, and awaits the signal (bounded by the
next sync) when nothing is there.

Cancellation: an event is taken only by the ``next_event(0)`` that returns
it, with no ``await`` between that and ``read`` returning, so cancelling a
pending ``read`` loses nothing. A ``read`` cancelled during a sync leaves that
compare-and-set's outcome unknown (applied or not): the next sync reconciles,
reading what the state says the reader holds (as after a lost answer).
"""

from __future__ import annotations

import asyncio
import builtins
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from types import TracebackType
from typing import Any, Generic, TypeVar

from folio._transport.read_policies import check_policy
from folio._transport.segment_streams import SegmentStreams
from folio.api.v1 import groups_pb2, read_pb2
from folio.errors import (
    FolioError,
    FolioUnavailableError,
    InvalidArgumentError,
    ReaderGroupExistsError,
    ReaderGroupNotFoundError,
    ReaderIdInUseError,
    ReaderNotInGroupError,
)
from folio.models import DeserializationPolicy, SegmentInfo, SegmentRange
from folio.read._event_read import DEFAULT_MAX_EVENTS, EventRead, check_max_events, listed_reads
from folio.read._group_admin import (
    GroupDescription,
    description,
    in_use_error,
    merge_reported,
)
from folio.read._group_calls import _GroupClient
from folio.read._group_heartbeat import Heartbeat
from folio.read._group_offsets import (
    PositionMove,
    check_empty,
    move_change,
    moved_positions,
)
from folio.read._group_start import GroupStart, initial_state
from folio.read._group_state import Successor
from folio.read._group_sync import apply_synced, join, leave, reset_to, sync_change
from folio.read.cuts import Checkpoint, Position
from folio.serializers import BytesSerializer, Serializer

__all__ = ["AsyncGroupReader", "AsyncReaderGroup"]

log = logging.getLogger(__name__)

T = TypeVar("T")

_DEFAULT_SESSION_MS = 10_000
_ISOLATIONS = {
    "read_committed": read_pb2.ReadRequest.READ_COMMITTED,
    "read_uncommitted": read_pb2.ReadRequest.READ_UNCOMMITTED,
}


class _Fetched:
    """The segments of a group's topics, fetched before (``initial_state`` asks blocking)."""

    def __init__(self, every: dict[str, list[SegmentRange]],
                 active: dict[str, list[SegmentRange]]) -> None:
        self._every, self._active = every, active

    def get_segments(self, topic: str, *, include_sealed: bool = False) -> list[SegmentRange]:
        return (self._every if include_sealed else self._active)[topic]

    def get_segment_info(self, segment: str) -> SegmentInfo:
        raise NotImplementedError  # (initial_state asks for segments only)

    def get_successors(self, segment: str) -> list[SegmentRange]:
        raise NotImplementedError


async def _fetch(topics: Sequence[str], start: GroupStart,
                 segments: Callable[..., Awaitable[list[SegmentRange]]]) -> _Fetched:
    """The segments ``initial_state`` asks for, fetched on the loop."""
    every = {t: await segments(t, include_sealed=True) for t in set(topics)}
    active = {t: await segments(t) for t in set(topics)} if start == "latest" else {}
    return _Fetched(every, active)


class AsyncReaderGroup:
    """A reader group from coroutines; made by ``AsyncClient.reader_group``."""

    def __init__(self, name: str, calls: _GroupClient, sync_interval_ms: int,
                 successors: Callable[[str], Awaitable[list[SegmentRange]]],
                 segments: Callable[..., Awaitable[list[SegmentRange]]],
                 members: list[AsyncGroupReader[Any]] | None = None) -> None:
        self.name = name
        #: The members made, kept where the client closes them (``AsyncClient.close``).
        self._members_made = members if members is not None else []
        self._segments = segments
        self._calls = calls
        self._sync_interval_ms = sync_interval_ms
        self._successors = successors

    @classmethod
    async def open(cls, name: str, calls: _GroupClient, topics: Sequence[str] | None,
                   start: GroupStart, sync_interval_ms: int, session_timeout_ms: int | None,
                   segments: Callable[..., Awaitable[list[SegmentRange]]],
                   successors: Callable[[str], Awaitable[list[SegmentRange]]],
                   members: list[AsyncGroupReader[Any]] | None = None) -> AsyncReaderGroup:
        """``ReaderGroup.open``: create the group at ``start``, or open it (same topics)."""
        if sync_interval_ms <= 0:
            raise InvalidArgumentError(f"sync_interval_ms must be > 0, not {sync_interval_ms}")
        if session_timeout_ms is not None and (
                isinstance(session_timeout_ms, bool) or not isinstance(session_timeout_ms, int)
                or session_timeout_ms <= 0):
            raise InvalidArgumentError(
                f"session_timeout_ms must be a positive int, not {session_timeout_ms!r}")
        group = cls(name, calls, sync_interval_ms, successors, segments, members)
        if topics is None:
            await calls.get_async(name)  # ReaderGroupNotFoundError
            return group
        if isinstance(topics, str) or not topics:
            raise InvalidArgumentError("topics must be a non-empty list of topic names")
        state = initial_state(await _fetch(topics, start, segments), name, topics, start)
        state.session_timeout_ms = session_timeout_ms or 0
        request = groups_pb2.CreateReaderGroupRequest(name=name, state=state.to_proto())
        try:
            await calls.create_async(request)  # an unknown outcome is reconciled
        except ReaderGroupExistsError:
            _, existing = await calls.get_async(name)
            if sorted(existing.topics) != sorted(set(topics)):
                raise InvalidArgumentError(
                    f"reader group {name!r} exists and reads {existing.topics}, not "
                    f"{sorted(set(topics))}") from None
            if session_timeout_ms is not None and \
                    session_timeout_ms != (existing.session_timeout_ms or _DEFAULT_SESSION_MS):
                raise InvalidArgumentError(
                    f"reader group {name!r} exists with session_timeout_ms "
                    f"{existing.session_timeout_ms or _DEFAULT_SESSION_MS}, not "
                    f"{session_timeout_ms}") from None
        return group

    async def reader(self, reader_id: str, serializer: Serializer[Any] | None = None, *,
                     isolation: str = "read_committed",
                     on_deserialization_error: DeserializationPolicy = "raise",
                     ) -> AsyncGroupReader[Any]:
        """A new member (the arguments and errors of ``ReaderGroup.reader``)."""
        if isolation not in _ISOLATIONS:
            raise InvalidArgumentError(
                f"isolation must be 'read_committed' or 'read_uncommitted', not {isolation!r}")
        check_policy(on_deserialization_error)
        session = uuid.uuid4().hex
        try:
            timeout_ms = await self._calls.cas_async(
                self.name, lambda state: join(state, reader_id, session))
        except ReaderIdInUseError as error:
            raise in_use_error(await self._members(), self.name, reader_id, error) from None
        made: AsyncGroupReader[Any] = AsyncGroupReader(
            self, reader_id, serializer or BytesSerializer(), _ISOLATIONS[isolation], session,
            timeout_ms or _DEFAULT_SESSION_MS, on_deserialization_error)
        self._members_made[:] = [m for m in self._members_made if not m.closed]
        self._members_made.append(made)
        return made

    async def online_readers(self) -> list[str]:
        """The members now, sorted."""
        return sorted((await self._calls.get_async(self.name))[1].readers)

    async def assignment(self) -> dict[str, list[str]]:
        """Reader -> the segments it holds now (``""`` -> free segments)."""
        _, state = await self._calls.get_async(self.name)
        held = {reader: sorted(segments) for reader, segments in state.readers.items()}
        held[""] = sorted(state.unassigned)
        return held

    async def checkpoints(self) -> list[Checkpoint]:
        """The latest completed checkpoints, oldest first."""
        return list((await self._calls.get_async(self.name))[1].completed)

    async def initiate_checkpoint(self, name: str) -> Checkpoint:
        """Starts checkpoint ``name`` and waits until every reader passed it (in their
        ``read``: they must keep reading); bound the wait with ``asyncio.timeout``.

        Raises:
            InvalidArgumentError: the name is empty or used already.
            FolioError: the checkpoint is gone (the group was reset).
        """
        await self._calls.cas_async(self.name, lambda state: state.initiate_checkpoint(name))
        delay = 0.01
        while True:
            _, state = await self._calls.get_async(self.name)
            done = state.completed_checkpoint(name)
            if done is not None:
                return done
            if all(p.name != name for p in state.pending):
                raise FolioError(f"checkpoint {name!r} of reader group {self.name!r} is gone "
                                 "(the group was reset, or later checkpoints pushed it out)")
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.25)

    async def reader_offline(self, reader_id: str, last_position: Position | None = None,
                             ) -> None:
        """Declares a reader gone; its segments go back to the pool (as
        ``ReaderGroup.reader_offline``: from ``last_position``, else from the offsets it
        last heartbeated or those the group recorded, if later).

        Raises:
            ReaderNotInGroupError: no such member.
            InvalidArgumentError: the position is another reader's.
        """
        if last_position is not None and last_position.reader_id != reader_id:
            raise InvalidArgumentError(f"the position is reader {last_position.reader_id!r}'s, "
                                       f"not {reader_id!r}'s")
        positions = None if last_position is None else dict(last_position.positions)
        if positions is None:
            members = await self._members()
            _, state = await self._calls.get_async(self.name)
            positions = merge_reported(members, lambda: state, reader_id)
        await self._calls.cas_async(
            self.name, lambda state: state.remove_reader(reader_id, positions))

    async def describe(self) -> GroupDescription:
        """Members (liveness, segments, positions), free and waiting segments, lag per
        segment (``ReaderGroup.describe``)."""
        _, state = await self._calls.get_async(self.name)
        liveness = await self._members()
        ends: dict[str, int] = {}
        for topic in state.topics:
            ends.update((s.name, s.end_offset)
                        for s in await self._segments(topic, include_sealed=True))
        return description(self.name, state, liveness, ends)

    async def _members(self) -> groups_pb2.GetMembersResponse:
        """The broker's view of the group's members. ``ReaderGroupNotFoundError``."""
        calls = self._calls
        reply: groups_pb2.GetMembersResponse = await calls.unary(
            calls.stub.GetMembers, groups_pb2.GetMembersRequest(name=self.name), retry=True)
        return reply

    async def reset(self, start: GroupStart, *, only_if_empty: bool = False,
                    dry_run: bool = False) -> dict[str, int]:
        """Starts the group over at ``start`` (``ReaderGroup.reset``: every reader is
        dropped; ``only_if_empty``: ``ReaderGroupNotEmptyError`` while it has members;
        ``dry_run``: nothing written); the positions it starts at."""
        _, state = await self._calls.get_async(self.name)
        fresh = initial_state(await _fetch(state.topics, start, self._segments), self.name,
                              state.topics, start)
        if dry_run:
            reset_to(state.copy(), fresh, only_if_empty)
        else:
            await self._calls.cas_async(
                self.name, lambda current: reset_to(current, fresh, only_if_empty))
        return dict(sorted(fresh.unassigned.items()))

    async def move_positions(self, move: PositionMove, value: int = 0, *,
                             topics: Sequence[str] = (),
                             partitions: Sequence[tuple[str, int]] = (),
                             dry_run: bool = False) -> dict[str, int]:
        """Moves an empty group's recorded positions (``ReaderGroup.move_positions``)."""
        _, state = await self._calls.get_async(self.name)
        check_empty(state)
        segments = {s.name: s for topic in state.topics
                    for s in await self._segments(topic, include_sealed=True)}
        if dry_run:
            return moved_positions(state, segments, move, value, topics, partitions)
        return await self._calls.cas_async(
            self.name, move_change(segments, move, value, topics, partitions))

    async def waiting_segments(self) -> dict[str, list[str]]:
        """Successors waiting -> the predecessors they still wait for."""
        _, state = await self._calls.get_async(self.name)
        return {name: list(f.waiting_for) for name, f in state.future.items()}

    async def session_timeout_ms(self) -> int:
        """A member silent this long is declared offline by the broker."""
        timeout_ms = (await self._calls.get_async(self.name))[1].session_timeout_ms
        return timeout_ms or _DEFAULT_SESSION_MS

    async def delete(self) -> None:
        """Deletes the group. ``ReaderGroupNotFoundError``."""
        await self._calls.delete_async(self.name)

    def __repr__(self) -> str:
        return f"<AsyncReaderGroup {self.name!r}>"


class AsyncGroupReader(Generic[T]):
    """One member of a reader group, from coroutines; made by ``AsyncReaderGroup.reader``.

    The position model of ``GroupReader``: ``read`` returns an ``EventRead``
    (the event and the reader's position after it, or a checkpoint event);
    every event returned before counts as processed at the next ``read``
    (heartbeats carry it). An async iterator and async context manager.
    """

    def __init__(self, group: AsyncReaderGroup, reader_id: str, serializer: Serializer[T],
                 isolation: read_pb2.ReadRequest.Isolation.ValueType, session_id: str,
                 session_timeout_ms: int, on_deserialization_error: DeserializationPolicy) -> None:
        self.group = group
        self.reader_id = reader_id
        calls = group._calls
        self._calls = calls
        self._session = session_id
        self._heartbeat = Heartbeat(calls.io, calls.heartbeat, group.name, reader_id, session_id,
                                    session_timeout_ms)
        self._returned: dict[str, int] | None = None
        self._streams: SegmentStreams[T] = SegmentStreams(
            io=calls.io, channels=calls.channels,
            deserialize=None if isinstance(serializer, BytesSerializer) else
            serializer.deserialize, isolation=isolation,
            on_deserialization_error=on_deserialization_error)
        self._arrived = asyncio.Event()
        self._items = self._streams.items.signal_to(self._arrived.set)
        self._interval_s = group._sync_interval_ms / 1000
        self._next_sync = 0.0
        self._checkpoint: str | None = None
        self._retry_at = 0.0
        self._reconcile = False
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

    async def read(self) -> EventRead[T] | None:
        """The next event or checkpoint event (``GroupReader.read_next``'s), waiting as long
        as it takes (bound it with ``asyncio.timeout``: cancelling loses nothing).

        Returns None once the reader is closed. Raises what ``read_next`` raises.
        """
        streams = self._streams
        if self._returned is not None:
            self._heartbeat.acknowledge(self._returned)
            self._returned = None
        while not self._closed:
            if self._checkpoint is not None:
                name, self._checkpoint = self._checkpoint, None
                self._returned = streams.positions()
                return EventRead(None, self.reader_id, self._returned, name)
            if streams.ended:
                self._finished.update(streams.finished())
            now = time.monotonic()
            if now >= self._next_sync or (
                    (self._finished or self._heartbeat.lost) and now >= self._retry_at):
                try:
                    await self._sync()
                except (FolioUnavailableError, builtins.TimeoutError) as error:
                    log.info("reader %s of group %s: sync failed, retrying: %s",
                             self.reader_id, self.group.name, error)
                    self._reconcile = True
                    self._retry_at = time.monotonic() + self._interval_s
                self._next_sync = time.monotonic() + self._interval_s
                continue
            event = streams.next_event(0)
            if event is not None:
                self._returned = streams.positions()
                return EventRead(event, self.reader_id, self._returned)
            if self._items.empty():
                self._arrived.clear()
                try:
                    async with asyncio.timeout(max(0.0, self._next_sync - now)):
                        await self._arrived.wait()
                except builtins.TimeoutError:
                    pass  # time to sync
        return None

    async def _sync(self) -> None:
        streams = self._streams
        finished = sorted(self._finished)
        successors = {segment: [Successor(s.name, s.start_offset, tuple(s.predecessors))
                                for s in await self.group._successors(segment)]
                      for segment in finished}
        positions = streams.positions()
        reading = set(streams.segments) if self._reconcile else None
        me, session = self.reader_id, self._session
        # Cancelled (or failed) from here on: the update's outcome is unknown,
        # so the next sync reconciles with what the state says this one holds.
        self._reconcile = True
        synced = await self._calls.cas_async(
            self.group.name, lambda state: sync_change(state, me, session, finished,
                                                       successors, positions, reading),
            settle_s=0.0)
        self._reconcile = False
        apply_synced(synced, streams, self._finished)
        if synced.checkpoint is not None:
            self._checkpoint = synced.checkpoint
            self._next_sync = 0.0

    async def read_many(self, max_events: int = DEFAULT_MAX_EVENTS) -> list[EventRead[T]]:
        """What ``read`` returns, then (after an event) the events unpacked already after
        it, up to ``max_events`` in all (``GroupReader.read_many``'s, waiting as long as
        it takes: bound it with ``asyncio.timeout``; cancelling loses nothing). Empty
        once the reader is closed; a checkpoint event comes alone.
        """
        check_max_events(max_events)
        first = await self.read()
        if first is None or first.event is None or max_events == 1:
            return [] if first is None else [first]
        # No await from here on: the events are taken and returned together.
        after_first = self._returned  # (the positions first carries)
        assert after_first is not None
        reads = [first, *listed_reads(self._streams.take_buffered(max_events - 1),
                                      self.reader_id, after_first)]
        self._returned = self._streams.positions()
        return reads

    def skip(self, error: Any) -> None:
        """Steps over the undecodable event ``error`` names (``GroupReader.skip``)."""
        self._streams.skip(error)
        self._returned = self._streams.positions()

    async def close(self) -> None:
        """Leaves the group, handing its segments back at its position. Idempotent.

        A pending ``read`` returns None."""
        if self._closed:
            return
        self._closed = True
        self._arrived.set()
        self._heartbeat.close()
        positions = self._streams.positions()
        self._streams.close()
        me, session = self.reader_id, self._session
        try:
            await self._calls.cas_async(
                self.group.name, lambda state: leave(state, me, session, positions),
                settle_s=0.0)  # else the session ends
        except (ReaderNotInGroupError, ReaderGroupNotFoundError):
            pass
        except FolioError as error:
            log.warning("reader %s could not leave group %s cleanly: %s", self.reader_id,
                        self.group.name, error)

    @property
    def closed(self) -> bool:
        """Whether ``close`` was called."""
        return self._closed

    def __aiter__(self) -> AsyncGroupReader[T]:
        return self

    async def __anext__(self) -> EventRead[T]:
        read = await self.read()
        if read is None:
            raise StopAsyncIteration
        return read

    async def __aenter__(self) -> AsyncGroupReader[T]:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, traceback: TracebackType | None) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"<AsyncGroupReader {self.reader_id!r} of {self.group.name!r}>"

