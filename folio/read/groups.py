"""Reader groups: readers that share topics' segments, with checkpoints and positions.

``Client.reader_group(name, topics, start=...)`` creates (or opens) a group
whose state lives in the broker (``ReaderGroups`` service) and changes only by
compare-and-set (``folio.read._group_state`` holds the rules). Each
``group.reader(reader_id)`` is a :class:`GroupReader`: it holds some segments
— an even share — and reads them; ``read_next(timeout=seconds)`` returns an
:class:`EventRead` carrying the event and the reader's position after it, or
a checkpoint event. A successor segment (after scaling) is handed out only
once all its predecessors were read to their end, so the events of one
routing key come in the order they were written, across scaling and across
readers.

A reader syncs with the group state every ``sync_interval_ms`` (and at once
when one of its segments ends): it passes pending checkpoints first (recording
its offsets and giving back segments beyond its fair share — the rebalancing
the seed describes), then hands finished segments over to their successors,
then takes free segments up to its share, or gives back its excess when a
member that joined is short of its share (rebalancing on membership change).

Members heartbeat to the broker (``folio.read._group_heartbeat``) with the offsets
their application has processed; one silent for the group's session timeout
(``session_timeout_ms``, default 10 s) is declared offline by the broker and
its segments go to the others from those offsets: at-least-once, nothing
skipped.

A member stays on an undecodable event (``DeserializationError``) until it decides.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
import uuid
from collections.abc import Sequence
from types import TracebackType
from typing import Any, Generic, TypeVar

from folio._deprecated import renamed_timeout
from folio._transport.read_policies import check_policy
from folio._transport.segment_streams import SegmentStreams
from folio.api.v1 import groups_pb2, read_pb2
from folio.errors import (
    DeserializationError,
    FolioError,
    FolioUnavailableError,
    InvalidArgumentError,
    ReaderGroupExistsError,
    ReaderGroupNotFoundError,
    ReaderIdInUseError,
    ReaderNotInGroupError,
    TimeoutError,
)
from folio.models import DeserializationPolicy, SegmentRange
from folio.read._event_read import DEFAULT_MAX_EVENTS, EventRead, check_max_events, listed_reads
from folio.read._group_admin import (
    GroupDescription,
    MemberStatus,
    SegmentLag,
    describe_group,
    id_in_use_error,
    reported_positions,
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
from folio.read._group_state import GroupState, Successor
from folio.read._group_sync import apply_synced, join, leave, reset_to, sync_change
from folio.read.cuts import Checkpoint, Position
from folio.serializers import BytesSerializer, Serializer

__all__ = ["EventRead", "GroupDescription", "GroupReader", "GroupStart", "MemberStatus",
           "ReaderGroup", "SegmentLag"]

log = logging.getLogger(__name__)

T = TypeVar("T")

#: The broker's default session timeout (groups.proto), for a state saying 0.
_DEFAULT_SESSION_MS = 10_000
_DEFAULT_SYNC_MS = 200
_ISOLATIONS = {
    "read_committed": read_pb2.ReadRequest.READ_COMMITTED,
    "read_uncommitted": read_pb2.ReadRequest.READ_UNCOMMITTED,
}


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
             start: GroupStart, sync_interval_ms: int,
             session_timeout_ms: int | None = None) -> ReaderGroup:
        """Create the group at ``start``, or open it if it exists (topics must then match)."""
        if sync_interval_ms <= 0:
            raise InvalidArgumentError(f"sync_interval_ms must be > 0, not {sync_interval_ms}")
        if session_timeout_ms is not None and (
                isinstance(session_timeout_ms, bool) or not isinstance(session_timeout_ms, int)
                or session_timeout_ms <= 0):
            raise InvalidArgumentError(
                f"session_timeout_ms must be a positive int, not {session_timeout_ms!r}")
        group = cls(name, calls, sync_interval_ms=sync_interval_ms)
        if topics is None:
            calls.get(name)  # ReaderGroupNotFoundError
            return group
        if isinstance(topics, str) or not topics:
            raise InvalidArgumentError("topics must be a non-empty list of topic names")
        state = initial_state(calls.client, name, topics, start)
        state.session_timeout_ms = session_timeout_ms or 0
        request = groups_pb2.CreateReaderGroupRequest(name=name, state=state.to_proto())
        try:
            calls.create(request)  # an unknown outcome is reconciled (_group_calls)
        except ReaderGroupExistsError:
            _, existing = calls.get(name)
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

    # -- readers ------------------------------------------------------------

    def reader(self, reader_id: str, serializer: Serializer[Any] | None = None, *,
               isolation: str = "read_committed",
               on_deserialization_error: DeserializationPolicy = "raise") -> GroupReader[Any]:
        """A new member of the group, reading its share of the segments.

        It heartbeats to the broker until closed; if its process dies, the
        broker declares it offline after the group's session timeout.
        ``on_deserialization_error``: ``"raise"``, ``"skip"`` or ``"raw"`` (see ``Client.reader``).

        Raises:
            ReaderIdInUseError: ``reader_id`` is a member already (a crashed
                member keeps its id until the broker declares it offline, after
                the session timeout: the error says how long is left).
            InvalidArgumentError: an empty id, a bad isolation or policy.
            ReaderGroupNotFoundError: the group was deleted.
        """
        if isolation not in _ISOLATIONS:
            raise InvalidArgumentError(
                f"isolation must be 'read_committed' or 'read_uncommitted', not {isolation!r}")
        check_policy(on_deserialization_error)
        session = uuid.uuid4().hex
        try:
            timeout_ms = self._calls.cas(self.name, lambda state: join(state, reader_id,
                                                                            session))
        except ReaderIdInUseError as error:
            raise id_in_use_error(self._calls, self.name, reader_id, error) from None
        return GroupReader(self, reader_id, serializer or BytesSerializer(),
                           _ISOLATIONS[isolation], self._sync_interval_ms, session,
                           timeout_ms or _DEFAULT_SESSION_MS, on_deserialization_error)

    def reader_offline(self, reader_id: str, last_position: Position | None = None) -> None:
        """Declares a reader gone; its segments go back to the pool.

        Args:
            reader_id: the reader.
            last_position: the position of the last event it processed (from
                ``EventRead.position``); its segments are read again from
                there, so nothing after it is read twice. None: from the
                offsets it last reported in a heartbeat, or those the group
                recorded (its last checkpoint or when it took them) if later,
                which may repeat events (never skips any).

        Raises:
            ReaderNotInGroupError: no such member.
            InvalidArgumentError: the position is another reader's.
        """
        if last_position is not None and last_position.reader_id != reader_id:
            raise InvalidArgumentError(f"the position is reader {last_position.reader_id!r}'s, "
                                       f"not {reader_id!r}'s")
        positions = None if last_position is None else dict(last_position.positions)
        if positions is None:
            positions = reported_positions(self._calls, self.name, reader_id)
        self._calls.cas(self.name, lambda state: state.remove_reader(reader_id, positions))

    @property
    def session_timeout_ms(self) -> int:
        """A member silent this long is declared offline by the broker."""
        return self._calls.get(self.name)[1].session_timeout_ms or _DEFAULT_SESSION_MS

    def describe(self) -> GroupDescription:
        """Members (liveness, segments, positions), free and waiting segments, lag per segment."""
        return describe_group(self._calls, self.name)

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

    def initiate_checkpoint(self, name: str, timeout: float | None = None, *,
                            timeout_s: float | None = None
                            ) -> concurrent.futures.Future[Checkpoint]:
        """Starts checkpoint ``name``; the future completes when every reader passed it.

        Readers pass it in their ``read_next`` calls (each returns a
        checkpoint event), so they must keep reading. The future fails with
        ``TimeoutError`` after ``timeout`` seconds (None: no limit; ``timeout_s``: deprecated).

        Raises:
            InvalidArgumentError: the name is empty or used already.
        """
        timeout_s = renamed_timeout("ReaderGroup.initiate_checkpoint", timeout, "timeout_s",
                                    timeout_s, 1.0)
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

    def reset(self, start: GroupStart, *, only_if_empty: bool = False,
              dry_run: bool = False) -> dict[str, int]:
        """Starts the group over at ``start``; every reader is dropped from it.

        Its readers fail with ``ReaderNotInGroupError`` at their next sync;
        make new ones. With ``only_if_empty`` (what ``folio group reset``
        does, as Kafka's offset reset) a group with members is refused with
        ``ReaderGroupNotEmptyError`` (checked in the same compare-and-set).
        Returns the positions it starts at (segment -> offset); with
        ``dry_run`` nothing is written (members refused all the same).
        """
        _, state = self._calls.get(self.name)
        fresh = initial_state(self._calls.client, self.name, state.topics, start)
        if dry_run:
            reset_to(state.copy(), fresh, only_if_empty)
        else:
            self._calls.cas(self.name, lambda current: reset_to(current, fresh, only_if_empty))
        return dict(sorted(fresh.unassigned.items()))

    def move_positions(self, move: PositionMove, value: int = 0, *,
                       topics: Sequence[str] = (), partitions: Sequence[tuple[str, int]] = (),
                       dry_run: bool = False) -> dict[str, int]:
        """Moves an empty group's recorded positions, as Kafka's tool moves offsets.

        ``move``: ``"offset"`` (every position at ``value``), ``"shift"``
        (each moved by ``value``, negative: back) or ``"current"`` (as it
        is); each new one is brought into its segment's [start, end]. Only
        the positions of ``topics`` and of ``partitions`` ((topic, segment
        number)s), or every one. ``dry_run``: nothing is written. Returns
        segment -> new position. Readers must make new group readers after.

        Raises:
            ReaderGroupNotEmptyError: the group has members (a dry run too).
            InvalidArgumentError: a topic the group does not read, a segment
                it records no position in, a negative offset.
        """
        _, state = self._calls.get(self.name)
        check_empty(state)
        segments = {s.name: s for topic in state.topics
                    for s in self._calls.client.get_segments(topic, include_sealed=True)}
        if dry_run:
            return moved_positions(state, segments, move, value, topics, partitions)
        return self._calls.cas(self.name,
                               move_change(segments, move, value, topics, partitions))

    def delete(self) -> None:
        """Deletes the group. ``ReaderGroupNotFoundError``."""
        self._calls.delete(self.name)

    def __repr__(self) -> str:
        return f"<ReaderGroup {self.name!r}>"


class GroupReader(Generic[T]):
    """One member of a reader group. Use from one thread; made by ``ReaderGroup.reader``."""

    def __init__(self, group: ReaderGroup, reader_id: str, serializer: Serializer[T],
                 isolation: read_pb2.ReadRequest.Isolation.ValueType,
                 sync_interval_ms: int, session_id: str, session_timeout_ms: int,
                 on_deserialization_error: DeserializationPolicy = "raise") -> None:
        self.group = group
        self.reader_id = reader_id
        calls = group._calls
        self._calls = calls
        self._session = session_id
        self._heartbeat = Heartbeat(calls.io, calls.heartbeat, group.name, reader_id, session_id,
                                    session_timeout_ms)
        #: The positions after the last event returned (the dict its EventRead
        #: carries, so acknowledging costs no copy), acknowledged at the next call.
        self._returned: dict[str, int] | None = None
        self._streams: SegmentStreams[T] = SegmentStreams(
            io=calls.io, channels=calls.channels,
            deserialize=None if isinstance(serializer, BytesSerializer) else
            serializer.deserialize, isolation=isolation,
            on_deserialization_error=on_deserialization_error)
        self._interval_s = sync_interval_ms / 1000
        self._next_sync = 0.0
        self._checkpoint: str | None = None
        #: After a failed sync: no retry before this; reconcile at the next one.
        self._retry_at = 0.0
        self._reconcile = False
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

    def read_next(self, timeout_ms: int | None = None, *,
                  timeout: float | None = None) -> EventRead[T] | None:
        """The next event (or checkpoint event), waiting up to ``timeout`` seconds.

        ``timeout_ms`` (also positional) is the deprecated spelling, in milliseconds.

        Returns:
            An ``EventRead``, or None when ``timeout`` passed (or the
            reader is closed).

        Raises:
            ReaderNotInGroupError: the reader was declared offline, or the
                group reset; it holds nothing any more.
            ReaderGroupNotFoundError: the group was deleted.
            DeserializationError: an undecodable payload (policy ``"raise"``):
                the reader stays on it until ``skip(error)``.
            FolioError: a segment's stream failed for good.
        """
        seconds = renamed_timeout("GroupReader.read_next", timeout, "timeout_ms", timeout_ms, 0.001)
        deadline = None if seconds is None else time.monotonic() + seconds
        streams = self._streams
        if self._returned is not None:
            # Every event returned by an earlier call counts as processed.
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
                    self._sync()
                except (FolioUnavailableError, TimeoutError) as error:
                    # The broker is away (restarting, say): keep reading what this
                    # reader holds and try again later; that sync reconciles the
                    # streams with the state in case this one's update was applied.
                    log.info("reader %s of group %s: sync failed, retrying: %s",
                             self.reader_id, self.group.name, error)
                    self._reconcile = True
                    self._retry_at = time.monotonic() + self._interval_s
                self._next_sync = time.monotonic() + self._interval_s
                continue
            wait = self._next_sync - now
            if deadline is not None:
                wait = min(wait, deadline - now)
                if wait <= 0:
                    return None
            event = streams.next_event(wait)
            if event is not None:
                self._returned = streams.positions()
                return EventRead(event, self.reader_id, self._returned)
        return None

    def read_many(self, max_events: int = DEFAULT_MAX_EVENTS,
                  timeout: float | None = None) -> list[EventRead[T]]:
        """What ``read_next(timeout=timeout)`` returns, then (after an event) the events
        unpacked already after it, up to ``max_events`` ``EventRead``s in all, each with
        the position after it: what as many ``read_next`` calls would return, without a
        call per event. Empty when ``timeout`` passed; a checkpoint event comes alone.
        Raises what ``read_next`` raises, and ``InvalidArgumentError`` for ``max_events``.
        """
        check_max_events(max_events)
        first = self.read_next(timeout=timeout)
        if first is None or first.event is None or max_events == 1:
            return [] if first is None else [first]
        after_first = self._returned  # (the positions first carries)
        assert after_first is not None
        reads = [first, *listed_reads(self._streams.take_buffered(max_events - 1),
                                      self.reader_id, after_first)]
        self._returned = self._streams.positions()
        return reads

    def skip(self, error: DeserializationError) -> None:
        """Steps over the event ``error`` names (``InvalidArgumentError``: not on it)."""
        self._streams.skip(error)
        self._returned = self._streams.positions()

    def _sync(self) -> None:
        streams = self._streams
        finished = sorted(self._finished)
        successors = {segment: self._successors(segment) for segment in finished}
        positions = streams.positions()
        reading = set(streams.segments) if self._reconcile else None
        me, session = self.reader_id, self._session
        synced = self._calls.cas(  # see _reconcile
            self.group.name, lambda state: sync_change(state, me, session, finished,
                                                       successors, positions, reading),
            settle_s=0.0)
        self._reconcile = False
        apply_synced(synced, streams, self._finished)
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
        self._heartbeat.close()
        positions = self._streams.positions()
        self._streams.close()

        me, session = self.reader_id, self._session
        try:
            self._calls.cas(self.group.name, lambda state: leave(state, me, session, positions),
                            settle_s=0.0)  # else the session ends
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
