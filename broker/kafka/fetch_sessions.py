"""Incremental fetch sessions (KIP-227): the broker's session cache and each request's plan.

A Fetch (v7+) names a session and an epoch:

- session 0, epoch -1 (``FINAL_EPOCH``): a full fetch without a session (what
  librdkafka sends); any session named with epoch -1 is closed first.
- epoch 0 (``INITIAL_EPOCH``): a full fetch that opens a session (closing the
  one named, if any). The answer carries every partition asked and the new
  session's id; the session remembers each partition's fetch offset and
  byte limit and the high watermark, last stable offset and log start last
  answered. No room in the cache (``max_sessions``, Kafka's
  ``max.incremental.fetch.session.cache.slots``, 1000), and no session idle
  for ``evict_after_s`` (Kafka: 120 s) to evict: the answer is a full one
  with session id 0, and the client goes on with full fetches.
- session N, epoch E > 0: an incremental fetch. The request carries only the
  partitions added or changed (their fetch offset or limit) and
  ``forgotten_topics_data``, the partitions to drop; the broker reads every
  partition of the session and answers only those with something new:
  records, an error, or a changed high watermark, last stable offset or log
  start. An unknown session is FETCH_SESSION_ID_NOT_FOUND, an epoch other
  than the one expected INVALID_FETCH_SESSION_EPOCH, a session opened by
  name asked by topic id (or the reverse: the client changed its Fetch
  version) FETCH_SESSION_TOPIC_ID_ERROR; each a top-level error with no
  partitions, after which the client opens a new session.

Partitions are keyed by (topic key, partition), the topic key being its name
(v7-v12) or its topic id's text (v13+). Partitions that answered records are
moved to the end of the session, so a byte limit reached early does not
starve the same partitions each time (as Kafka does). The cache is one per
listener (``KafkaContext.fetch_sessions``), in memory: a restarted broker
answers FETCH_SESSION_ID_NOT_FOUND and clients start again with a full fetch.
``opened``/``evicted``/``incremental``/``refused`` count what the cache did,
as does ``folio_kafka_fetch_sessions_total{event}`` (docs/observability.md).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode
from prometheus_client import Counter

__all__ = ["FINAL_EPOCH", "INITIAL_EPOCH", "FetchPlan", "FetchSession", "FetchSessionCache",
           "PartitionKey", "PartitionState", "Wanted"]

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
_NO_SESSION = 0
_MAX_EPOCH = 2**31 - 1

#: What the caches did, by event: ``opened`` (a session made), ``evicted`` (an
#: idle one dropped for a new one), ``incremental`` (an incremental fetch served),
#: ``refused`` (an incremental fetch answered with a session error), ``full``
#: (no room: a full answer without a session).
SESSION_EVENTS = Counter(
    "folio_kafka_fetch_sessions_total",
    "Kafka incremental fetch sessions (KIP-227), by event: opened, evicted, incremental, "
    "refused, full.", ["event"])

#: (topic key, partition): the topic's name (v7-v12) or its id's text (v13+).
PartitionKey = tuple[str, int]


@dataclass(frozen=True, slots=True)
class Wanted:
    """A partition as a request asks it: where to read from and how much."""

    key: PartitionKey
    fetch_offset: int
    max_bytes: int


@dataclass(frozen=True, slots=True)
class PartitionState:
    """What a read of a partition found, as the answer will carry it."""

    high_watermark: int
    last_stable: int
    log_start: int
    has_records: bool
    error: ErrorCode = ErrorCode.none


@dataclass(slots=True)
class _Cached:
    fetch_offset: int
    max_bytes: int
    high_watermark: int = -1
    last_stable: int = -1
    log_start: int = -1

    def must_answer(self, state: PartitionState) -> bool:
        """Whether an incremental answer carries it; notes what it answers."""
        changed = (state.has_records or state.error is not ErrorCode.none
                   or (state.high_watermark, state.last_stable, state.log_start)
                   != (self.high_watermark, self.last_stable, self.log_start))
        self.note(state)
        return changed

    def note(self, state: PartitionState) -> None:
        # An error forgets the high watermark, so the partition is answered
        # again once the error is gone (as Kafka's CachedPartition).
        self.high_watermark = -1 if state.error is not ErrorCode.none else state.high_watermark
        self.last_stable = state.last_stable
        self.log_start = state.log_start


@dataclass(slots=True)
class FetchSession:
    """One session: its id, the epoch expected next, its partitions in answer order."""

    session_id: int
    by_id: bool
    epoch: int = 1
    partitions: dict[PartitionKey, _Cached] = field(default_factory=dict)
    last_used: float = 0.0


@dataclass(slots=True)
class FetchPlan:
    """What one Fetch reads and, once read, which partitions its answer carries.

    ``error``: a top-level session error (answer it with no partitions).
    ``reads``: the partitions to read, in answer order.
    """

    reads: list[Wanted]
    error: ErrorCode = ErrorCode.none
    session: FetchSession | None = None
    #: A full fetch that opens a session once answered.
    opening: bool = False
    cache: FetchSessionCache | None = None
    by_id: bool = False

    def answer(self, states: dict[PartitionKey, PartitionState]) -> tuple[int, list[PartitionKey]]:
        """The session id to answer and the partitions the answer carries, in order."""
        if self.cache is None or self.error is not ErrorCode.none:
            return _NO_SESSION, [w.key for w in self.reads]
        if self.opening:
            session = self.cache.open(self.reads, states, by_id=self.by_id)
            return (_NO_SESSION if session is None else session.session_id,
                    [w.key for w in self.reads])
        session = self.session
        if session is None:  # sessionless
            return _NO_SESSION, [w.key for w in self.reads]
        carried = [w.key for w in self.reads if w.key in session.partitions
                   and w.key in states and session.partitions[w.key].must_answer(states[w.key])]
        for key in carried:
            if states[key].has_records:  # to the end: no partition starves
                session.partitions[key] = session.partitions.pop(key)
        return session.session_id, carried


class FetchSessionCache:
    """The sessions of one listener, at most ``max_sessions``.

    Args:
        max_sessions: the most sessions kept (0: none, every fetch is full).
        evict_after_s: idle time after which a session may be evicted for a new one.
        clock: monotonic seconds.
    """

    def __init__(self, max_sessions: int = 1000, evict_after_s: float = 120.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._max = max_sessions
        self._evict_after_s = evict_after_s
        self._clock = clock
        self._sessions: dict[int, FetchSession] = {}
        self.opened = 0
        self.evicted = 0
        self.incremental = 0
        self.refused = 0

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, session_id: int) -> FetchSession | None:
        """The session of that id, None if there is none."""
        return self._sessions.get(session_id)

    def plan(self, session_id: int, epoch: int, wanted: Iterable[Wanted],
             forgotten: Iterable[PartitionKey], *, by_id: bool) -> FetchPlan:
        """What a request of this session and epoch reads (``FetchPlan``).

        ``wanted``: the request's partitions; ``forgotten``: its
        ``forgotten_topics_data``; ``by_id``: it names topics by id (v13+).
        """
        wanted = list(wanted)
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):  # a full fetch
            if session_id != _NO_SESSION:
                self._sessions.pop(session_id, None)
            # The request lists each partition once; the last wins if not.
            reads = list({w.key: w for w in wanted}.values())
            if epoch == FINAL_EPOCH:
                return FetchPlan(reads)
            return FetchPlan(reads, opening=True, cache=self, by_id=by_id)
        session = self._sessions.get(session_id)
        error = (ErrorCode.fetch_session_id_not_found if session is None
                 else ErrorCode.fetch_session_topic_id_error if session.by_id != by_id
                 else ErrorCode.invalid_fetch_session_epoch if epoch != session.epoch
                 else ErrorCode.none)
        if session is None or error is not ErrorCode.none:
            self.refused += 1
            SESSION_EVENTS.labels("refused").inc()
            return FetchPlan([], error)
        session.epoch = 1 if session.epoch >= _MAX_EPOCH else session.epoch + 1
        session.last_used = self._clock()
        for w in wanted:
            cached = session.partitions.get(w.key)
            if cached is None:
                session.partitions[w.key] = _Cached(w.fetch_offset, w.max_bytes)
            else:
                cached.fetch_offset, cached.max_bytes = w.fetch_offset, w.max_bytes
        for key in forgotten:
            session.partitions.pop(key, None)
        self.incremental += 1
        SESSION_EVENTS.labels("incremental").inc()
        reads = [Wanted(key, c.fetch_offset, c.max_bytes)
                 for key, c in session.partitions.items()]
        return FetchPlan(reads, session=session, cache=self)

    def open(self, reads: list[Wanted], states: dict[PartitionKey, PartitionState], *,
             by_id: bool) -> FetchSession | None:
        """A new session of the partitions answered; None when the cache has no room."""
        now = self._clock()
        if len(self._sessions) >= self._max and not self._evict_one(now):
            SESSION_EVENTS.labels("full").inc()
            return None
        session_id = _NO_SESSION
        while session_id == _NO_SESSION or session_id in self._sessions:
            session_id = random.randint(1, _MAX_EPOCH)
        session = FetchSession(session_id, by_id, last_used=now)
        for w in reads:
            cached = _Cached(w.fetch_offset, w.max_bytes)
            state = states.get(w.key)
            if state is not None:
                cached.note(state)
            session.partitions[w.key] = cached
        self._sessions[session_id] = session
        self.opened += 1
        SESSION_EVENTS.labels("opened").inc()
        return session

    def _evict_one(self, now: float) -> bool:
        """Evict the least recently used session if idle long enough; whether one was."""
        if not self._sessions:
            return False
        oldest = min(self._sessions.values(), key=lambda s: s.last_used)
        if now - oldest.last_used < self._evict_after_s:
            return False
        del self._sessions[oldest.session_id]
        self.evicted += 1
        SESSION_EVENTS.labels("evicted").inc()
        return True
