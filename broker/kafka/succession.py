"""Produce to a sealed partition: the batch goes to the partition's heir (docs/kafka.md).

A Kafka producer hashes keys over every partition Metadata lists, sealed ones
included (they stay partitions so consumers read them to their end), and it
never moves a batch to another partition: a partition that refused writes
would fail every record whose key hashes to it. So a batch for a sealed
partition ``P`` is appended whole, as the producer sent it, to ``P``'s
*heir*: its first successor (lowest ``key_low``), or that one's heir if it is
sealed too, down to an open segment. The heir of a sealed segment never
changes (successors are fixed when it is sealed), so every batch of ``P`` goes
to the same open segment, in the order the producer sent them, after every
record ``P`` holds: a reader that reads a segment's predecessors before it
(the SDK's readers) reads ``P``'s records in the producer's order.

Idempotent producers number the records of each partition 0, 1, 2 ...; the
numbers of ``P``'s stream go on past ``P``'s seal. In the heir the stream is
writer ``kafka:<id>:<epoch>@<P's number>`` (apart from the producer's own
stream to the heir as a partition, which has its own numbers), numbered from 0
at ``P``'s last sequence + 1: ``P`` is sealed, so that *base* is final, and the
heir holds the stream to the same contiguous rules as any partition (resends
answered as duplicates, gaps refused). A batch at or below ``P``'s last
sequence is a resend of one ``P`` holds: DUPLICATE_SEQUENCE_NUMBER (written
before; Kafka clients take it as success). A heir sealed in its turn passes the
stream on the same way, its base growing by what the heir holds.

Order: the batches of one stream (partition, writer) that meet a sealed
segment go one after another (each waits for the stream's previous batch to be
answered), so one that was numbered for ``P`` before the seal is settled
before the next is placed in the heir. Batches to open partitions are not
held up: they append at once, as before.

Crash windows: nothing is decided before the heir's append, whose writer
state is persisted with the heir. A broker that dies (or a connection that is
cut) between the walk and the append, or before the answer, leaves the
producer to resend: the resend walks again from the sealed partition, whose
state is final, and the heir drops it if it holds it.

In a cluster a heir may be owned by another broker: the walk goes on there
(``walk``'s ``forward``: ``broker.kafka.forwarding``), under the same writer
id and numbers, so the rules above hold across brokers.

The answer's base offset for a batch appended to a heir is unknown
(``UNKNOWN_BASE_OFFSET``): the offset is in another partition, which the
producer did not ask about.
Transactional batches go the same way (``broker.kafka.handlers.transactions``:
the heir is registered in the transaction, not the sealed partition).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from kio.schema.errors import ErrorCode

from broker.api import SegmentHandle, Topics
from broker.errors import BrokerError, SegmentSealedError, WrongHostError
from broker.kafka.error_codes import error_code
from broker.segments.names import parse_segment_name
from ledger.errors import LedgerError

__all__ = ["UNKNOWN_BASE_OFFSET", "Forward", "Outcome", "StreamAppend", "Succession", "walk"]

log = logging.getLogger(__name__)

#: The base offset answered for a batch stored in a heir (its offset is another
#: partition's): librdkafka's "invalid offset". librdkafka numbers a batch's
#: records from any other base, -1 included (-1, 0, 1 ...: offsets the
#: partition does not hold), and reports none from this one.
UNKNOWN_BASE_OFFSET = -1001
#: How many times an open-looking segment may refuse an append as sealed.
_MAX_REFUSALS = 3
#: Waits before the walk from a sealed partition is tried again after a WrongHost.
_RELOAD_DELAYS_S = (0.05, 0.2, 0.5)

#: (Kafka error code, base offset, error message) of one partition's batch.
Outcome = tuple[ErrorCode, int, str | None]
#: Appends the batch to an open segment: (segment, segment name, writer id,
#: last event number) -> its outcome (every error answered as its Kafka code);
#: raises ``SegmentSealedError`` if the segment is sealed (nothing written).
StreamAppend = Callable[[SegmentHandle, str, str, int], Awaitable[Outcome]]
#: Continues a walk on the broker that owns a heir (``broker.kafka.forwarding``):
#: (heir, its owner as a WrongHost named it or "", writer id, last event number
#: there) -> the outcome there (every error answered as its Kafka code).
Forward = Callable[[str, str, str, int], Awaitable[Outcome]]


class Succession:
    """One listener's routing of batches for sealed partitions to their heirs.

    Holds the last batch started of each stream (partition, writer), so a
    stream's batches are placed in order.
    """

    def __init__(self) -> None:
        self._tails: dict[tuple[str, str], asyncio.Future[Outcome]] = {}

    def start(self, topics: Topics, segment: SegmentHandle, name: str, writer: str,
              last: int, event_count: int, append: StreamAppend,
              forward: Forward | None = None) -> asyncio.Future[Outcome]:
        """Start the append of one batch for partition ``name`` (its segment loaded).

        The segment is appended to at once; if it is sealed (before or under
        the append: ``SegmentSealedError``, nothing written) the batch goes to
        its heir once the stream's previous batch is answered. The task's
        first step runs before any later-made task's
        (``broker.kafka.handlers.produce``). ``forward``: sends the rest of the
        walk to the broker owning a heir this broker does not (``walk``).
        """
        key = (name, writer)
        previous = self._tails.get(key)
        task = asyncio.ensure_future(self._direct(
            previous, topics, segment, name, writer, last, event_count, append, forward))
        self._tails[key] = task
        task.add_done_callback(lambda done: self._forget(key, done))
        return task

    def _forget(self, key: tuple[str, str], done: asyncio.Future[Outcome]) -> None:
        if self._tails.get(key) is done:
            del self._tails[key]

    async def _direct(self, previous: asyncio.Future[Outcome] | None, topics: Topics,
                      segment: SegmentHandle, name: str, writer: str, last: int,
                      event_count: int, append: StreamAppend,
                      forward: Forward | None) -> Outcome:
        try:
            return await append(segment, name, writer, last)
        except SegmentSealedError:
            # Sealed (before or after it was looked up): nothing written to it.
            return await self._after(previous, topics, name, writer, last, event_count,
                                     append, forward)

    async def _after(self, previous: asyncio.Future[Outcome] | None, topics: Topics,
                     name: str, writer: str, last: int, event_count: int,
                     append: StreamAppend, forward: Forward | None) -> Outcome:
        if previous is not None:
            # Settled either way (its outcome is its own request's answer).
            await asyncio.wait([previous])
        try:
            for delay_s in _RELOAD_DELAYS_S:
                try:
                    return await walk(topics, name, writer, last, event_count, append,
                                      partition=True, forward=forward)
                except WrongHostError:
                    # Loading the sealed partition again raced another broker's
                    # change of its record (a scale there fenced and sealed it):
                    # refused for a moment, nothing written; look again.
                    await asyncio.sleep(delay_s)
            return await walk(topics, name, writer, last, event_count, append,
                              partition=True, forward=forward)
        except (BrokerError, LedgerError) as error:
            # Nothing written (a segment could not be loaded, or the last one
            # has no heir: its topic is sealed).
            return error_code(error), -1, str(error)




async def walk(topics: Topics, start: str, writer: str, last: int, event_count: int,
               append: StreamAppend, *, partition: bool,
               forward: Forward | None = None) -> Outcome:
    """Walk from ``start`` to the open segment that takes the stream; append there.

    ``partition``: ``start`` is the Kafka partition the producer named (a
    stream leaving it is renamed ``writer@<number>``, and an outcome in
    another segment answers ``UNKNOWN_BASE_OFFSET``); else ``start`` is a
    heir a walk was forwarded to, ``writer`` and ``last`` are the stream's
    there already. ``forward``: continues the walk on the broker owning a
    segment this broker does not (``broker.kafka.forwarding``); None: such a
    segment answers NOT_LEADER_OR_FOLLOWER, nothing written.

    Raises what loading a segment raises (``BrokerError``, ``LedgerError``;
    ``WrongHostError`` for ``start`` itself not owned here),
    ``SegmentSealedError`` for a sealed segment without successors.
    """
    first = last - event_count + 1
    current, stream, base = start, writer, 0
    refusals = 0
    while True:
        try:
            segment = await topics.writable_segment(current, "Kafka Produce")
        except WrongHostError as elsewhere:
            if current == start or forward is None:
                raise
            # Another broker owns this heir: it continues the walk there.
            code, offset, message = await forward(current, elsewhere.owner, stream, last - base)
            if partition:  # the offset is another partition's
                offset = UNKNOWN_BASE_OFFSET if code is ErrorCode.none else -1
            return code, offset, message
        if not segment.info().sealed:
            try:
                outcome = await append(segment, current, stream, last - base)
            except SegmentSealedError as sealed:
                # Sealed meanwhile: look at it again, now final (bounded, in
                # case a segment refuses appends without saying it is sealed).
                refusals += 1
                if refusals > _MAX_REFUSALS:
                    return (ErrorCode.not_leader_or_follower, -1,
                            f"not written: {sealed}")
                continue
            if (outcome[0] is ErrorCode.not_leader_or_follower and current != start
                    and refusals < _MAX_REFUSALS):
                # The heir moved or was handed over under the append (nothing
                # written): look it up again, here or at its owner.
                refusals += 1
                continue
            if current == start or not partition:
                return outcome
            code, _, message = outcome
            return code, UNKNOWN_BASE_OFFSET, message
        if writer:
            recorded = await segment.last_event_number(stream)
            if last - base <= recorded:
                log.info("kafka: producer %s resent a batch (last sequence %d) that "
                         "sealed %s holds: DUPLICATE_SEQUENCE_NUMBER", writer, last,
                         current)
                return (ErrorCode.duplicate_sequence_number, -1,
                        f"the batch ending at sequence {last} was written to {current} "
                        "before it was sealed")
            if first - base <= recorded:
                return (ErrorCode.out_of_order_sequence_number, -1,
                        f"sequences {first} to {last} overlap what sealed {current} "
                        f"holds (to sequence {recorded + base}) without matching it")
            # Past what it holds: its next segment checks for gaps.
            base += recorded + 1
        _, successors = await topics.get_successors(current)
        heir = successors[0].name if successors else None
        if heir is None:
            raise SegmentSealedError(current, segment.info().segment.end_offset)
        if current == start and partition and writer:
            stream = f"{writer}@{parse_segment_name(start)[1]}"
        log.debug("kafka: a batch for sealed %s goes to %s (writer %r, base %d)",
                  current, heir, stream, base)
        current = heir
