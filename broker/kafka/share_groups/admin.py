"""A share group's share partitions for its coordinator: read and changed where they are kept.

The offsets admin APIs (DescribeShareGroupOffsets, AlterShareGroupOffsets,
DeleteShareGroupOffsets) and DeleteGroups run on the group's coordinator, but a
share partition's state is its partition leader's (docs/kafka.md, "Share
groups", "On a cluster"): reading another broker's segment here would fence
its owner. So ``ShareStates`` does each action on a share partition served
here itself (``LocalShareStates``), and asks the leader of any other over the
internal protocol (``KafkaInternal.ShareState``, ``serve`` on the leader's
side); listing a group's share partitions asks every broker owning a
container for those it keeps. A standalone has no cluster parts: all is here.

Outcomes of a call: an answer (its Kafka error code, if any, is the
partition's); ``WrongHostError`` (that broker does not own it: asked again of
the owner it names, or of the owner known then); another refusal that is not
retriable (raised); no answer (a timeout, a broker down or cut:
``BrokerShuttingDownError``, or a retriable ledger error): the outcome is
unknown, but every action is idempotent (a describe reads; a reset to the
same start, or a forget, done twice is done once), so it is asked again, until
``timeout_s``; then ``BrokerShuttingDownError`` (retriable), and the client's
retry asks again. A container nobody owns now (a failover) is waited for the
same way: a listing must cover every container.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Final

from kio.schema.errors import ErrorCode

from broker._proto.v1 import kafka_internal_pb2
from broker.api import Topics
from broker.cluster.containers import OwnerRecord
from broker.errors import (
    BrokerError,
    BrokerShuttingDownError,
    InvalidArgumentError,
    NoSuchSegmentError,
    WrongHostError,
)
from broker.kafka.share_groups.coordinator import ShareCoordinator
from broker.kafka.share_groups.records import share_lag
from broker.segments.names import make_segment_name, parse_segment_name
from ledger.errors import LedgerError

__all__ = ["AskLeader", "LocalShareStates", "ShareStates", "serve"]

#: ``PeerClients.share_state``: (broker's address, request) -> answer.
AskLeader = Callable[[str, kafka_internal_pb2.ShareStateRequest],
                     Awaitable[kafka_internal_pb2.ShareStateResponse]]
#: How long a partition's leader (or a container's owner) is looked for.
LOOKUP_TIMEOUT_S: Final = 10.0
_FIRST_DELAY_S: Final = 0.1
_MAX_DELAY_S: Final = 1.0
_Action = kafka_internal_pb2.ShareStateAction


class LocalShareStates:
    """The actions on share partitions served here (``topics``: the ones this broker serves)."""

    def __init__(self, topics: Topics, shares: ShareCoordinator) -> None:
        self._topics = topics
        self._shares = shares

    async def listed(self, group_id: str) -> list[tuple[str, int]]:
        """(topic, partition) of the group's share partitions kept here."""
        return await self._shares.store.share_partitions(group_id)

    async def describe(self, group_id: str, topic: str, number: int) -> tuple[int, int]:
        """(start offset, lag); (-1, -1) for one never started. Raises what reads raise."""
        records = await self._shares.partitions.records_of(group_id, topic, number)
        if records is None:
            return -1, -1
        segment = await self._topics.segment(make_segment_name(topic, number))
        return records.start, share_lag(records, segment.info().segment.end_offset)

    async def reset(self, group_id: str, topic: str, number: int,
                    start: int) -> tuple[ErrorCode, str | None]:
        """Start the share partition at ``start`` (OFFSET_OUT_OF_RANGE outside the log)."""
        segment = await self._topics.segment(make_segment_name(topic, number))
        info = segment.info().segment
        if not info.start_offset <= start <= info.end_offset:
            return ErrorCode.offset_out_of_range, (
                f"start offset {start} is outside [{info.start_offset}, {info.end_offset}]")
        await self._shares.partitions.reset(group_id, topic, number, start)
        return ErrorCode.none, None

    async def forget(self, group_id: str, topic: str, number: int) -> None:
        """Delete the share partition's state (nothing written if it has none; the store
        refuses a container not served here: ``WrongHostError``)."""
        if await self._shares.partitions.records_of(group_id, topic, number) is not None:
            await self._shares.partitions.reset(group_id, topic, number, None)


async def serve(local: LocalShareStates, request: kafka_internal_pb2.ShareStateRequest,
                ) -> kafka_internal_pb2.ShareStateResponse:
    """The leader's side of ``ShareState`` (proto/broker/v1/kafka_internal.proto).

    Raises ``WrongHostError`` (not led here), ``InvalidArgumentError`` (no group
    id, no segment) and what the store and reads raise.
    """
    if not request.group_id:
        raise InvalidArgumentError("ShareState needs a group id")
    if request.action == _Action.SHARE_STATE_LIST:
        listed = await local.listed(request.group_id)
        return kafka_internal_pb2.ShareStateResponse(partitions=[
            kafka_internal_pb2.SharePartitionName(topic=topic, partition=number)
            for topic, number in listed])
    try:
        topic, number = parse_segment_name(request.segment)
    except NoSuchSegmentError:
        raise InvalidArgumentError(f"ShareState needs a segment, got {request.segment!r}"
                                   ) from None
    if request.action == _Action.SHARE_STATE_DESCRIBE:
        start, lag = await local.describe(request.group_id, topic, number)
        return kafka_internal_pb2.ShareStateResponse(start_offset=start, lag=lag)
    if request.action == _Action.SHARE_STATE_RESET:
        code, message = await local.reset(request.group_id, topic, number,
                                          request.start_offset)
        return kafka_internal_pb2.ShareStateResponse(error_code=code.value,
                                                     error_message=message or "")
    if request.action == _Action.SHARE_STATE_FORGET:
        await local.forget(request.group_id, topic, number)
        return kafka_internal_pb2.ShareStateResponse()
    raise InvalidArgumentError(f"unknown ShareState action {request.action}")


class ShareStates:
    """The actions on any share partition (see the module docstring).

    Args:
        local: the share partitions served here.
        serves: whether this broker serves a segment now; None (a standalone):
            everything is here.
        lookup: the owner of a segment (``ZooKeeperOwners.lookup``), "" if none.
        owners: each container's owner now (None: nobody), and its count.
        ask: the call on another broker (``PeerClients.share_state``).
        timeout_s: how long a leader or owner is looked for.
    """

    def __init__(self, local: LocalShareStates, serves: Callable[[str], bool] | None = None,
                 lookup: Callable[[str], Awaitable[str]] | None = None,
                 owners: tuple[Callable[[int], OwnerRecord | None], int] | None = None,
                 ask: AskLeader | None = None, *,
                 serves_container: Callable[[int], bool] | None = None,
                 timeout_s: float = LOOKUP_TIMEOUT_S) -> None:
        self._local = local
        self._serves = serves
        self._lookup = lookup
        self._owners = owners
        self._ask = ask
        self._serves_container = serves_container
        self._timeout_s = timeout_s

    async def listed(self, group_id: str) -> list[tuple[str, int]]:
        """(topic, partition) of every share partition of the group, on every broker."""
        found = set(await self._local.listed(group_id))
        if self._owners is None or self._ask is None or self._serves_container is None:
            return sorted(found)
        owner_of, count = self._owners
        request = kafka_internal_pb2.ShareStateRequest(
            group_id=group_id, action=_Action.SHARE_STATE_LIST)
        deadline = time.monotonic() + self._timeout_s
        delay_s = _FIRST_DELAY_S
        while True:
            addresses, missing = set(), []
            for container in range(count):
                if self._serves_container(container):
                    continue
                record = owner_of(container)
                if record is None:
                    missing.append(container)
                else:
                    addresses.add(record.address)
            failure = f"containers {missing} have no owner now" if missing else ""
            answers = []
            if not failure:
                try:
                    async with asyncio.timeout(max(deadline - time.monotonic(),
                                                   _FIRST_DELAY_S)):
                        for address in sorted(addresses):
                            answers.append(await self._ask(address, request))
                except TimeoutError:
                    failure = "a broker did not answer in time"
                except (BrokerError, LedgerError) as error:
                    if not error.retriable:
                        raise
                    failure = str(error)  # no answer: a read, asked again
            if not failure:
                for answer in answers:
                    found.update((p.topic, p.partition) for p in answer.partitions)
                # (a container that moved meanwhile is listed by its new owner, or was
                # by this broker: its share partitions stay put, whoever answers)
                return sorted(found)
            if time.monotonic() + delay_s > deadline:
                raise BrokerShuttingDownError(
                    f"share partitions of group {group_id!r} not listed: {failure}")
            await asyncio.sleep(delay_s)
            delay_s = min(delay_s * 2, _MAX_DELAY_S)

    async def describe(self, group_id: str, topic: str, number: int) -> tuple[int, int]:
        """(start offset, lag) of the share partition, (-1, -1) never started."""
        segment = make_segment_name(topic, number)
        if self._here(segment):
            return await self._local.describe(group_id, topic, number)
        answer = await self._remote(segment, kafka_internal_pb2.ShareStateRequest(
            group_id=group_id, action=_Action.SHARE_STATE_DESCRIBE, segment=segment))
        return answer.start_offset, answer.lag

    async def reset(self, group_id: str, topic: str, number: int,
                    start: int) -> tuple[ErrorCode, str | None]:
        """Start the share partition at ``start``; its Kafka error, if any."""
        segment = make_segment_name(topic, number)
        if self._here(segment):
            return await self._local.reset(group_id, topic, number, start)
        answer = await self._remote(segment, kafka_internal_pb2.ShareStateRequest(
            group_id=group_id, action=_Action.SHARE_STATE_RESET, segment=segment,
            start_offset=start))
        return ErrorCode(answer.error_code), answer.error_message or None

    async def forget(self, group_id: str, topic: str, number: int) -> None:
        """Delete the share partition's state."""
        segment = make_segment_name(topic, number)
        if self._here(segment):
            await self._local.forget(group_id, topic, number)
            return
        await self._remote(segment, kafka_internal_pb2.ShareStateRequest(
            group_id=group_id, action=_Action.SHARE_STATE_FORGET, segment=segment))

    def _here(self, segment: str) -> bool:
        return self._serves is None or self._ask is None or self._serves(segment)

    async def _remote(self, segment: str, request: kafka_internal_pb2.ShareStateRequest,
                      ) -> kafka_internal_pb2.ShareStateResponse:
        """``request`` answered by the segment's owner (module docstring: outcomes)."""
        assert self._ask is not None and self._lookup is not None and self._serves is not None
        deadline = time.monotonic() + self._timeout_s
        delay_s, hint = _FIRST_DELAY_S, ""
        while True:
            # (this broker, if it has come to own the segment meanwhile: its own server
            # answers from its share partitions)
            address = hint or await self._lookup(segment)
            hint = ""
            if not address:
                failure = "no broker serves it now (its owner is failing over?)"
            else:
                try:
                    async with asyncio.timeout(max(deadline - time.monotonic(),
                                                   _FIRST_DELAY_S)):
                        return await self._ask(address, request)
                except TimeoutError:
                    failure = f"{address} did not answer in time"
                except WrongHostError as elsewhere:
                    failure = f"{address}: {elsewhere}"
                    hint = elsewhere.owner if elsewhere.owner != address else ""
                except (BrokerError, LedgerError) as error:
                    if not error.retriable:
                        raise
                    failure = f"{address}: {error}"  # unknown outcome: idempotent, again
            if time.monotonic() + delay_s > deadline:
                raise BrokerShuttingDownError(
                    f"the share state of {segment} was not reached: {failure}")
            await asyncio.sleep(delay_s)
            delay_s = min(delay_s * 2, _MAX_DELAY_S)
