"""``FlowEngine``: one writer's flow to one segment, whatever the writer (``folio._flow``).

**Units and numbers.** The engine keeps the units its policy submitted, in
order, until each is settled. A unit is numbered on its first send from the
writer's next event number and keeps its number for good (the broker
de-duplicates by writer id and event number). Units go out in *sequences*
(the policy says how many units form one, and whether one may go now: its
window, i.e. back-pressure): a sequence's blocks are sent in order, every
one but the last with ``end = false`` (held by the broker, PDP-44), the last
with ``end = true``; the broker writes the sequence as one entry and answers
its end block alone.

**Setup.** A flow is registered on a stream (``FlowSource.open_flow``) and
sends ``SetupAppend(segment, writer_id, txn_id)`` whenever the stream opens.
The answer's ``last_event_number`` L is the last number the segment stored
for this writer: queued units numbered at or below L were written (their
answer was lost) and are settled as such; numbering resumes above L; every
other unit is sent (again) in order. Each setup starts a new *generation*:
answers to commands of an earlier one are ignored, because what they
answered is settled by the setup.

**In doubt.** A lost stream, a retriable refusal (after a backoff that
doubles up to 2 s) and a move to another broker all put every unit sent and
not answered in doubt: it stays queued with its number, and the next setup
settles it or sends it again. The broker stores a flow's blocks as a prefix
of those sent (after a refusal it refuses the flow's later blocks until a
new setup), so a unit at or below L is stored and one above it is not:
nothing is lost, nothing written twice.

**WrongHost.** In a cluster (``Brokers`` as the source) a ``WrongHost``
answer, or a stream lost to a broker that cannot be reached, moves the flow
(MOVING) to the segment's owner (``Brokers.follow``); once registered on the
owner's stream it sets up there as after a reconnect.

**Deadlines.** The stream ticks every flow; the policy gives up on what is
past its deadline (``FlowPolicy.tick``), using ``down_since`` or its units'
own deadlines.

**The writer's API** (on the engine's event loop, each call returns at once,
nothing awaits): :meth:`start`, :meth:`submit`, :meth:`release`,
:meth:`die`, :meth:`remove`, :meth:`take`, :meth:`resume`, :meth:`learn_sealed`,
:meth:`enter_sealed`, :meth:`detach`; read ``state``, ``dead``,
``last_error``, ``units``. The stream's API is
``AppendFlow`` and ``MovingFlow`` (``on_reply``, ``on_stream_ready``,
``on_stream_lost``, ``on_tick``, ``on_moved``, ``on_move_failed``). Timers
are the running loop's ``call_later``: the engine runs on whatever loop its
stream runs on.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Final, Generic, TypeVar

from folio._flow.policy import FlowPolicy, FlowUnit
from folio._flow.retries import SetupRetries
from folio._status import error_from_reply
from folio._transport.brokers import Brokers
from folio._transport.flow_state import FlowState, move
from folio.api.v1 import append_pb2
from folio.errors import FolioError, WrongHostError

if TYPE_CHECKING:
    from folio._transport.append_stream import AppendStream, FlowSource

__all__ = ["FlowEngine"]

U = TypeVar("U", bound=FlowUnit)

_SEQUENCE_MASK: Final = (1 << 32) - 1
_READY: Final = FlowState.READY
_SENDING: Final = (FlowState.READY, FlowState.SETTING_UP)


class FlowEngine(Generic[U]):
    """One flow: state, stream, setup, sends, answers, resends, moves (module docstring)."""

    __slots__ = ("_flow_id", "_log", "_next_event_number", "_outstanding",
                 "_pending", "_policy", "_queue", "_retries", "_sealed", "_sealing",
                 "_source", "_stream", "_txn_id", "_writer_id", "dead", "down_since",
                 "last_error", "resent", "segment", "settled_by_setup", "state")

    def __init__(self, segment: str, *, writer_id: str, source: FlowSource,
                 policy: FlowPolicy[U], log: logging.Logger, kind: str = "append",
                 txn_id: bytes = b"") -> None:
        """Args:
        segment: the segment's name.
        writer_id: the writer's identity on the broker.
        source: where the flow registers (the client's ``Brokers`` or pool,
            or one ``AppendStream``).
        policy: what this writer's flow does its own way.
        log: the policy's logger (retries are logged there).
        kind: what the flow appends, in log lines ("append", ...).
        txn_id: the full transaction the flow writes in (``SetupAppend``); none.
        """
        self.segment = segment
        self._writer_id = writer_id
        self._txn_id = txn_id
        self._source = source
        self._policy = policy
        self._log = log
        self._retries = SetupRetries(log, kind)
        self._stream: AppendStream | None = None  # once registered
        self._flow_id = 0
        self.state = FlowState.NEW
        self._queue: deque[U] = deque()
        #: Units at the head of the queue sent on this setup generation, unanswered.
        self._outstanding = 0
        #: Sequence of a command awaiting its answer -> the units it ends (None: the setup).
        self._pending: dict[int, list[U] | None] = {}
        self._next_event_number = 0
        self._sealing = False  # the next setup only learns what a sealed segment holds
        self._sealed = False  # ... and it was answered: nothing more is sent here
        #: Why the flow ended for good (every unit fails with it, now and later).
        self.dead: FolioError | None = None
        #: The last error retried (told with a later failure).
        self.last_error: FolioError | None = None
        #: ``time.monotonic()`` since when units are in doubt and no setup answered.
        self.down_since: float | None = None
        #: Units sent again with the number they had (after a reconnect, a refusal, a move).
        self.resent = 0
        #: Units a setup's answer showed were written (their answer lost).
        self.settled_by_setup = 0

    # == the writer's side =======================================================

    @property
    def units(self) -> Sequence[U]:
        """The units not settled yet, in order (read only)."""
        return self._queue

    @property
    def sealing(self) -> bool:
        """Whether the flow is learning (or learnt) what its sealed segment holds."""
        return self._sealing

    def start(self) -> FolioError | None:
        """Registers the flow on a stream (NEW only); it sets up when the stream opens.

        Returns the error that refused the registration (the flow stays NEW).
        """
        if self.state is not FlowState.NEW:
            return None
        try:
            self._stream, self._flow_id = self._source.open_flow(self)
        except FolioError as error:
            return error
        self._move(FlowState.DISCONNECTED)
        return None

    def submit(self, units: Iterable[U]) -> None:
        """Queues ``units`` (in order) and sends what the policy's window allows."""
        self._queue.extend(units)
        if self.state is _READY:
            self._pump()

    def remove(self, units: Iterable[U]) -> None:
        """Drops ``units`` from the queue (settled by the policy); absent ones are skipped."""
        queue = self._queue
        for unit in units:
            if queue and queue[0] is unit:
                queue.popleft()
                if self._outstanding:
                    self._outstanding -= 1
                continue
            for index, queued in enumerate(queue):
                if queued is unit:
                    del queue[index]
                    if index < self._outstanding:
                        self._outstanding -= 1
                    break

    def take(self) -> list[U]:
        """Empties the queue; its units, in order (the policy moves them elsewhere)."""
        units = list(self._queue)
        self._queue.clear()
        self._outstanding = 0
        return units

    def resume(self) -> None:
        """Outstanding units count as not sent (refused whole); sends what the window allows."""
        self._outstanding = 0
        self._pump()

    def release(self) -> list[U]:
        """Ends the flow (CLOSED) and leaves its stream; the units not settled, in order."""
        if self.state is FlowState.CLOSED:
            return []
        self._unregister()
        self._move(FlowState.CLOSED)
        return self.take()

    def die(self, error: FolioError) -> None:
        """The flow can never succeed: CLOSED, and every unit is abandoned with ``error``."""
        if self.state is FlowState.CLOSED:
            return
        self.dead = error
        self._unregister()
        self._move(FlowState.CLOSED)
        self._policy.abandon(self.take(), error)

    def learn_sealed(self) -> None:
        """Sets up once more only to learn which units the sealed segment holds.

        Its answer settles those (``FlowPolicy.settled``), sends nothing, and
        calls ``FlowPolicy.sealed`` (state SEALED); the rest is the policy's.
        """
        self._sealing = True
        self._send_setup()

    def enter_sealed(self) -> None:
        """SEALED without an answer (the broker refused the sealing setup): ``sealed``."""
        self._move(FlowState.SEALED)
        self._sealed = True
        self._policy.sealed()

    def detach(self) -> None:
        """After a failed move: off every stream (NEW); ``start`` registers it again."""
        self._move(FlowState.NEW)

    # == the stream's side (AppendFlow, MovingFlow) ===============================

    def on_stream_ready(self) -> None:
        """The stream (re)opened: set up (the answer decides what to resend)."""
        if not self._flow_id or self.state is FlowState.CLOSED or self._sealed:
            return
        self._send_setup()

    def on_stream_lost(self, error: FolioError) -> None:
        """The stream broke: every command sent on it is in doubt until the next setup.

        In a cluster the broker may be gone for good: the flow looks its
        segment's owner up elsewhere instead of waiting for it.
        """
        if self.state is FlowState.CLOSED:
            return
        self._move(FlowState.DISCONNECTED)
        self._in_doubt()
        self.last_error = error
        source = self._source
        if isinstance(source, Brokers) and source.cluster and self._flow_id \
                and not self._sealed:
            self._follow(source, WrongHostError(
                f"the broker of segment {self.segment!r} cannot be reached: {error}",
                segment=self.segment, owner=""))

    def on_moved(self, stream: AppendStream, flow_id: int) -> bool:
        """Registered on the owner's stream: sets up there when it opens."""
        if self.state is not FlowState.MOVING:
            return False  # released (or ended) while moving
        self._stream, self._flow_id = stream, flow_id
        self._move(FlowState.DISCONNECTED)
        return True

    def on_move_failed(self, error: FolioError) -> None:
        """No owner found by the policy's deadline: the policy decides."""
        if self.state is not FlowState.MOVING:
            return
        self.last_error = error
        self._policy.move_failed(error)

    def on_tick(self, now: float) -> None:
        """Periodic: the policy gives up on what is past its deadline."""
        self._policy.tick(now)

    def on_reply(self, reply: append_pb2.AppendReply) -> None:
        """Routes a reply to the command it answers (replies come in command order)."""
        sequence = reply.request_id & _SEQUENCE_MASK
        pending = self._pending
        if sequence not in pending:
            return  # answers a command of a setup generation since replaced (or a held block)
        group = pending.pop(sequence)
        kind = reply.WhichOneof("reply")
        if kind == "append_setup" and group is None:
            self._on_setup(reply.append_setup.last_event_number)
        elif kind == "data_appended":
            if group is not None:
                self._on_appended(group, reply.data_appended)
        else:
            self._on_refused(group, error_from_reply(reply, self.segment))

    # == internals ===============================================================

    def _move(self, to: FlowState) -> None:
        self.state = move(self.state, to, self.segment)

    def _send(self, command: append_pb2.AppendCommand) -> int | None:
        stream = self._stream
        if stream is None or not self._flow_id:
            return None
        return stream.send(self._flow_id, command)

    def _send_setup(self) -> None:
        # A new generation: what was sent before is settled by this setup's answer.
        self._pending.clear()
        self._outstanding = 0
        sequence = self._send(append_pb2.AppendCommand(setup_append=append_pb2.SetupAppend(
            segment=self.segment, writer_id=self._writer_id, txn_id=self._txn_id)))
        if sequence is None:
            self._move(FlowState.DISCONNECTED)  # on_stream_ready sets up
            return
        self._move(FlowState.SETTING_UP)
        self._pending[sequence] = None

    def _in_doubt(self) -> None:
        """What was sent waits for the next setup (its answer settles it)."""
        self._pending.clear()
        self._outstanding = 0
        if self.down_since is None:
            self.down_since = time.monotonic()

    def _pump(self) -> None:
        """Sends sequences while the flow is READY and the policy's window allows."""
        queue = self._queue
        policy = self._policy
        while self.state is _READY and self._outstanding < len(queue):
            start = self._outstanding
            count = policy.sequence(queue, start)
            if count <= 0:
                return
            group = [queue[start + index] for index in range(count)]
            for unit in group:
                if unit.last_event_number is None:
                    self._next_event_number += unit.event_count
                    unit.last_event_number = self._next_event_number - 1
                else:
                    self.resent += 1
            head = group[0]
            number = (head.last_event_number or 0) - head.event_count
            pieces = policy.frame(group)
            last = len(pieces) - 1
            for index, (data, events) in enumerate(pieces):
                number += events
                end = index == last
                sequence = self._send(append_pb2.AppendCommand(
                    append_block=append_pb2.AppendBlock(data=data, event_count=events,
                                                        last_event_number=number, end=end)))
                if sequence is None:
                    # The stream is gone: the blocks sent so far die with it (the
                    # broker drops a dead stream's held blocks); all go again.
                    self._move(FlowState.DISCONNECTED)
                    self._in_doubt()
                    return
                if end:  # a held block is answered only when refused, and then
                    self._pending[sequence] = group  # its end block is refused too
            self._outstanding = start + count

    def _on_setup(self, last_event_number: int) -> None:
        if self._next_event_number <= last_event_number:
            self._next_event_number = last_event_number + 1
        self._move(FlowState.SEALED if self._sealing else FlowState.READY)
        self.down_since = None
        queue = self._queue
        while queue:
            head = queue[0]
            number = head.last_event_number
            if number is None:
                break
            if number <= last_event_number:
                # Written already: its answer was lost, or it was refused while
                # its entry still reached the bookies (a ledger that failed under
                # it: the next load's recovery keeps every entry a bookie holds).
                queue.popleft()
                self.settled_by_setup += 1
                self._policy.settled(head)
                continue
            if number - head.event_count + 1 <= last_event_number:
                # Cannot happen with one writer per writer id: renumber what is
                # queued above the recorded number, not to be taken for a duplicate.
                self._log.warning(
                    "writer %s on %s: recorded event number %d falls inside a unit "
                    "numbered up to %d; renumbering", self._writer_id, self.segment,
                    last_event_number, number)
                for unit in queue:
                    unit.last_event_number = None
                self._next_event_number = last_event_number + 1
            break
        if self._sealing:
            self._sealed = True
            self._policy.sealed()
            return
        self._pump()

    def _on_appended(self, group: list[U], appended: append_pb2.DataAppended) -> None:
        self._retries.reset()
        self.last_error = None
        self.remove(group)
        self._policy.appended(group, appended)
        self._pump()

    def _on_refused(self, group: list[U] | None, error: FolioError) -> None:
        """A refusal of the setup (``group`` None) or of a sequence's end block."""
        self.last_error = error
        source = self._source
        if isinstance(error, WrongHostError) and isinstance(source, Brokers):
            if self.state is not FlowState.MOVING:
                self._follow(source, error)
            return
        if self._policy.refused(group, error):
            return
        if error.retriable and self.state in _SENDING:
            # Transient (the ledger service, a broker shutting down, any
            # UNAVAILABLE): set up again and resend what the setup's answer
            # says was not stored.
            self._reset(error)

    def _reset(self, error: FolioError) -> None:
        self._move(FlowState.RESETTING)
        self._in_doubt()

        def retry() -> None:
            if self.state is FlowState.RESETTING and self._flow_id:
                self._send_setup()

        self._retries.schedule(self.segment, error, retry)

    def _follow(self, source: Brokers, error: WrongHostError) -> None:
        """Off this stream to the segment's owner (``Brokers.follow``), as after a lost stream.

        Sent units stay in doubt: the setup on the owner settles them. The
        lookup, when the answer named no owner, gives up at the policy's
        ``follow_deadline``.
        """
        self._move(FlowState.MOVING)
        self._in_doubt()
        self.last_error = error
        stream, flow_id = self._stream, self._flow_id
        self._stream, self._flow_id = None, 0
        source.follow(self, stream, flow_id, error, self._policy.follow_deadline())

    def _unregister(self) -> None:
        if self._flow_id and self._stream is not None:
            self._stream.unregister(self._flow_id)
        self._stream = None
        self._flow_id = 0
        self._pending.clear()
        self._outstanding = 0
