"""A segment owner's side of transactions whose coordinator may run on another broker.

In a cluster the coordinator runs on one broker (the owner of the container
of ``_txnlog/0``) while a transaction may write to segments any broker owns.
Every transactional append of a cluster broker goes through
``TxnParticipant.writing`` (on the coordinator's broker too, so there is one
path and one count of appends in flight per segment owner):

1. **Register.** The first append of transaction T to segment S on this
   broker asks the coordinator to log S in T's record (``register``: the
   in-process coordinator when it runs here, else the internal RPC
   ``RegisterTxnSegment``). The coordinator refuses unless T is OPEN. One
   lock per (T, S) makes the appends of one segment pass in their call
   order, and lets only the first register.
2. **Count.** Once the registration returned, the append checks that T is
   not closed for S and counts itself in flight, synchronously (no await in
   between), then writes.
3. **Marker.** ``write_marker`` (the coordinator's decision reaching this
   broker: in process, or the internal RPC ``WriteTxnMarker``) first closes T
   for S, so every later append of T to S is refused (``TxnStateError``, as a
   finished transaction's appends are on the coordinator), then waits for
   T's appends in flight on S, then writes the marker.

**The race this closes.** The coordinator may decide T (and send its marker)
while a registration's answer is still on its way back here: the marker can
arrive first. It closes T for S; the append resumes after its registration,
sees T closed at step 2 and is refused. Nothing of T lands after its marker.
Closed transactions are remembered for ``finished_retention_ms`` (the time a
finished transaction stays known to the coordinator; after it the
coordinator itself refuses the registration: NOT_FOUND).

**Segments that move.** A registration is remembered with the loaded
segment it was made for: once the segment went to another broker and came
back (a new load), the next append registers again, and the coordinator
refuses it if T was decided meanwhile (its marker went to the other owner).
Registrations never marked (the segment moved before the marker) are
forgotten once older than ``MAX_TXN_TIMEOUT_MS`` plus the retention: T was
decided by then.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

from broker.errors import TxnStateError
from broker.segments.entry import EntryKind
from broker.txn.states import DEFAULT_FINISHED_RETENTION_MS, MAX_TXN_TIMEOUT_MS
from txnbuffer.api import TxnId
from txnbuffer.txn_ids import txn_id_hex

__all__ = ["MarkableSegment", "TxnParticipant"]


class MarkableSegment(Protocol):
    """A loaded segment that takes transaction markers (``LedgerSegment``)."""

    async def write_marker(self, kind: EntryKind, txn_id: TxnId) -> int:
        """Write the marker once durable; its offset."""
        ...


#: Logs segment S in transaction T's record at the coordinator (T, S); raises its refusal.
Register = Callable[[TxnId, str], Awaitable[None]]
#: The segment, served by this broker (WrongHostError, NoSuchSegmentError otherwise).
SegmentOf = Callable[[str], Awaitable[MarkableSegment]]

_FINISHED = {EntryKind.COMMIT_MARKER: "COMMITTED", EntryKind.ABORT_MARKER: "ABORTED"}
_FINISHING = {EntryKind.COMMIT_MARKER: "COMMITTING", EntryKind.ABORT_MARKER: "ABORTING"}


@dataclass(eq=False)
class _Writing:
    """T's appends to S on this broker: registration and appends in flight."""

    registered: bool = False
    #: The loaded segment the registration was made for.
    registered_for: object = None
    registered_ms: int = 0
    in_flight: int = 0
    #: Appends inside ``writing`` (waiting for the lock, registering or in flight).
    users: int = 0
    idle: asyncio.Event = field(default_factory=asyncio.Event)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def __post_init__(self) -> None:
        self.idle.set()


@dataclass(frozen=True, slots=True)
class _Closed:
    kind: EntryKind
    closed_ms: int
    #: The marker is durable (else it is being written).
    done: bool


class TxnParticipant:
    """Transactional appends and markers of the segments this broker serves.

    Args:
        register: asks the coordinator to log a segment in a transaction.
        segment_of: the segment to write a marker to (served here, or it raises).
        clock: seconds since the epoch.
        finished_retention_ms: how long a closed transaction is remembered.
    """

    def __init__(self, register: Register, segment_of: SegmentOf, *,
                 clock: Callable[[], float] = time.time,
                 finished_retention_ms: int = DEFAULT_FINISHED_RETENTION_MS) -> None:
        if finished_retention_ms < 0:
            raise ValueError(f"finished_retention_ms must be >= 0, got {finished_retention_ms}")
        self._register = register
        self._segment_of = segment_of
        self._clock = clock
        self._retention_ms = finished_retention_ms
        self._writing: dict[tuple[TxnId, str], _Writing] = {}
        #: Closed (T, S), oldest first (``_forget`` drops from the front).
        self._closed: OrderedDict[tuple[TxnId, str], _Closed] = OrderedDict()
        self._forgot_ms = 0

    @contextlib.asynccontextmanager
    async def writing(self, txn_id: TxnId, segment: str,
                      loaded: object = None) -> AsyncIterator[None]:
        """Around one transactional append of ``txn_id`` to ``segment`` (module docstring).

        ``loaded``: the segment object the append goes to (a new load registers again).

        Raises:
            TxnStateError: the transaction is closed for this segment, or not OPEN.
            TxnNotFoundError: the coordinator does not know it.
            WrongHostError, BrokerError: the coordinator could not be asked.
        """
        key = (txn_id, segment)
        self._check_not_closed(key)
        entry = self._writing.get(key)
        if entry is None:
            entry = self._writing[key] = _Writing()
        entry.users += 1  # never forgotten while an append holds or waits for it
        try:
            # FIFO, and taking a free lock does not yield: appends keep their order.
            async with entry.lock:
                if not entry.registered or entry.registered_for is not loaded:
                    await self._register(txn_id, segment)
                    entry.registered, entry.registered_for = True, loaded
                    entry.registered_ms = self._now_ms()
                # From here to the count, no await: a marker that arrived while the
                # registration was answered has closed the transaction already.
                self._check_not_closed(key)
                entry.in_flight += 1
                entry.idle.clear()
            try:
                yield
            finally:
                entry.in_flight -= 1
                if entry.in_flight == 0:
                    entry.idle.set()
        finally:
            entry.users -= 1
            if entry.users == 0 and (not entry.registered or key in self._closed) \
                    and self._writing.get(key) is entry:
                # A refused registration, or a closed transaction: nothing to keep.
                del self._writing[key]

    async def write_marker(self, segment: str, txn_id: TxnId, kind: EntryKind) -> None:
        """Close ``txn_id`` for ``segment``, wait for its appends in flight, write ``kind``.

        Idempotent: a second marker of the same kind writes it again (which
        changes nothing in the segment). Returns once the marker is durable.

        Raises:
            InvalidArgumentError: ``kind`` is not a marker kind.
            WrongHostError, NoSuchSegmentError, LedgerError: as the segment's
                ``write_marker``; the transaction stays closed here.
        """
        now = self._now_ms()
        self._forget(now)
        key = (txn_id, segment)
        if key not in self._closed:
            self._closed[key] = _Closed(kind, now, done=False)
        entry = self._writing.get(key)
        if entry is not None:
            await entry.idle.wait()
            if entry.users == 0 and self._writing.get(key) is entry:
                del self._writing[key]
        target = await self._segment_of(segment)
        await target.write_marker(kind, txn_id)
        closed = self._closed.get(key)
        if closed is not None:
            self._closed[key] = _Closed(closed.kind, closed.closed_ms, done=True)

    def in_flight(self, txn_id: TxnId, segment: str) -> int:
        """Appends of ``txn_id`` to ``segment`` under way here (for tests and metrics)."""
        entry = self._writing.get((txn_id, segment))
        return 0 if entry is None else entry.in_flight

    def tracked(self) -> int:
        """How many (transaction, segment) pairs are held in memory (closed ones apart)."""
        return len(self._writing)

    def _check_not_closed(self, key: tuple[TxnId, str]) -> None:
        closed = self._closed.get(key)
        if closed is not None:
            actual = (_FINISHED if closed.done else _FINISHING)[closed.kind]
            raise TxnStateError(txn_id_hex(key[0]), "OPEN", actual)

    def _forget(self, now_ms: int) -> None:
        """Drop closed transactions past the retention and registrations never marked.

        At most once a second: the scan of registrations is not made per marker.
        """
        if now_ms - self._forgot_ms < 1000:
            return
        self._forgot_ms = now_ms
        horizon = now_ms - self._retention_ms
        while self._closed:
            key, closed = next(iter(self._closed.items()))
            if closed.closed_ms > horizon:
                break
            del self._closed[key]
        stale = horizon - MAX_TXN_TIMEOUT_MS
        for key in [key for key, entry in self._writing.items()
                    if entry.users == 0 and entry.registered_ms <= stale]:
            del self._writing[key]

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)
