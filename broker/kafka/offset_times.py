"""Offsets by time of any partition of a cluster: read where it is served, asked of its owner.

A Kafka group's reset by time (``folio group reset --to-datetime``,
``broker.kafka.consumer_groups.offset_reset``) runs on the group's
coordinator, but reads each partition on the broker that serves it: loading
another broker's segment here would fence its owner's ledger. So
``OffsetTimes.offset_at`` reads a segment this broker serves itself
(``broker.kafka.timestamps``, as ListOffsets by time), and asks the owner
of any other for it over the internal protocol (``KafkaInternal.OffsetForTime``,
``serve`` on the owner's side).

Outcomes of the call: an answer; ``WrongHostError`` (that broker does not
own it: asked again of the owner it names, or of the owner known then);
``NoSuchSegmentError`` and other refusals that are not retriable (raised);
no answer (a timeout, a broker down or cut: ``BrokerShuttingDownError``, or
a ledger error that is retriable): the outcome is unknown, but the call only
reads, so it is simply asked again. A partition nobody serves (its owner's
session expired and nobody has claimed it yet: a failover) is looked up
again until ``timeout_s`` (every call is bounded by it too, so the reset
answers within a client's deadline); then the reset fails with
``BrokerShuttingDownError`` saying which partition has no broker (retriable:
UNAVAILABLE; the SDK tries the reset again within its own deadline, which a
failover fits in).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Final

from broker._proto.v1 import kafka_internal_pb2
from broker.api import Isolation, Topics
from broker.errors import BrokerError, BrokerShuttingDownError, InvalidArgumentError, WrongHostError
from broker.kafka.timestamps import offset_for_time
from broker.segments.names import parse_segment_name
from ledger.errors import LedgerError

__all__ = ["AskOwner", "OffsetTimes", "serve"]

log = logging.getLogger(__name__)

#: ``PeerClients.offset_for_time``: (owner's address, request) -> answer.
AskOwner = Callable[[str, kafka_internal_pb2.OffsetForTimeRequest],
                    Awaitable[kafka_internal_pb2.OffsetForTimeResponse]]
#: How long a partition is looked for before the reset fails.
LOOKUP_TIMEOUT_S: Final = 10.0
_FIRST_DELAY_S: Final = 0.1
_MAX_DELAY_S: Final = 1.0


async def _read_here(topics: Topics, segment: str, time_ms: int,
                     isolation: Isolation) -> tuple[int, int, int]:
    """(offset, its timestamp, end offset) of ``segment`` read on this broker."""
    handle = await topics.segment(segment)
    offset, stamp = await offset_for_time(handle, time_ms, isolation)
    end = (handle.committed_end if isolation is Isolation.READ_COMMITTED
           else handle.info().segment.end_offset)
    return offset, stamp, end


async def serve(topics: Topics, request: kafka_internal_pb2.OffsetForTimeRequest
                ) -> kafka_internal_pb2.OffsetForTimeResponse:
    """The owner's side of ``OffsetForTime``: ``topics`` are the ones it serves.

    Raises:
        WrongHostError: this broker does not serve ``request.segment``.
        InvalidArgumentError: no segment, or a negative time.
        NoSuchSegmentError, LedgerError: what reading the segment raises.
    """
    if not request.segment or request.timestamp_ms < 0:
        raise InvalidArgumentError("OffsetForTime needs a segment and a time >= 0, got "
                                   f"{request.segment!r} and {request.timestamp_ms}")
    isolation = Isolation.READ_COMMITTED if request.read_committed else Isolation.READ_UNCOMMITTED
    offset, stamp, end = await _read_here(topics, request.segment, request.timestamp_ms,
                                          isolation)
    return kafka_internal_pb2.OffsetForTimeResponse(offset=offset, timestamp_ms=stamp,
                                                    end_offset=end)


class OffsetTimes:
    """The first offset at or after a time of any partition (see the module docstring).

    Args:
        topics: this broker's topic manager (reads the segments it serves).
        serves: whether this broker serves a segment now; None (a standalone):
            every segment is read here.
        lookup: the owner of a segment (``ZooKeeperOwners.lookup``: memory, or
            a fresh read while memory names none); "" when nobody owns it.
        ask: the call on the owner (``PeerClients.offset_for_time``).
        timeout_s: how long a partition's owner is looked for.
    """

    def __init__(self, topics: Topics, serves: Callable[[str], bool] | None = None,
                 lookup: Callable[[str], Awaitable[str]] | None = None,
                 ask: AskOwner | None = None, *, timeout_s: float = LOOKUP_TIMEOUT_S) -> None:
        self._topics = topics
        self._serves = serves
        self._lookup = lookup
        self._ask = ask
        self._timeout_s = timeout_s

    async def offset_at(self, segment: str, time_ms: int) -> tuple[int, int]:
        """(first offset at or after ``time_ms`` or -1, end offset) of ``segment``, read
        uncommitted (as Kafka's tool asks).

        Raises ``BrokerShuttingDownError`` when no broker serves it (or none
        answers) within ``timeout_s``; ``NoSuchSegmentError`` and what the
        owner's read raises otherwise.
        """
        isolation = Isolation.READ_UNCOMMITTED
        if self._serves is None or self._lookup is None or self._ask is None:
            offset, _stamp, end = await _read_here(self._topics, segment, time_ms, isolation)
            return offset, end
        request = kafka_internal_pb2.OffsetForTimeRequest(segment=segment, timestamp_ms=time_ms)
        deadline = time.monotonic() + self._timeout_s
        delay_s, hint = _FIRST_DELAY_S, ""
        while True:
            if self._serves(segment):
                offset, _stamp, end = await _read_here(self._topics, segment, time_ms, isolation)
                return offset, end
            address = hint or await self._lookup(segment)
            hint = ""
            if not address:
                failure = "no broker serves it now (its owner is failing over?)"
            else:
                try:
                    # Bounded by what is left (a client's call has its own deadline).
                    async with asyncio.timeout(max(deadline - time.monotonic(), _FIRST_DELAY_S)):
                        answer = await self._ask(address, request)
                except TimeoutError:
                    failure = f"{address} did not answer in time"
                except WrongHostError as elsewhere:
                    # Not served there (it moved): ask the owner it names.
                    failure = f"{address}: {elsewhere}"
                    hint = elsewhere.owner if elsewhere.owner != address else ""
                except (BrokerError, LedgerError) as error:
                    if not error.retriable:
                        raise
                    # No answer: unknown, but a read; asked again.
                    failure = f"{address} did not answer: {error}"
                else:
                    return answer.offset, answer.end_offset
            if time.monotonic() + delay_s > deadline:
                topic, number = parse_segment_name(segment)
                raise BrokerShuttingDownError(
                    f"a reset by time reads each partition on the broker serving it: "
                    f"{topic} partition {number} is not served after {self._timeout_s:g} s "
                    f"({failure}); try again once a broker serves it")
            log.debug("kafka: offset by time of %s asked again in %.2f s: %s", segment,
                      delay_s, failure)
            await asyncio.sleep(delay_s)
            delay_s = min(delay_s * 2, _MAX_DELAY_S)
