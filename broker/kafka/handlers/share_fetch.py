"""ShareFetch (78) v1-v2 and ShareAcknowledge (79) v1-v2: records of share groups (KIP-932).

Thin: the session rules are ``broker.kafka.share_groups.sessions``', the
records' ``partitions``'. A request needs ``consume`` on the group
(GROUP_AUTHORIZATION_FAILED, the whole answer) and on each topic
(TOPIC_AUTHORIZATION_FAILED, its partitions). Top-level errors: INVALID_REQUEST
(no member id; acknowledgements in a request opening a session),
UNKNOWN_MEMBER_ID (not a member of the group now), SHARE_SESSION_NOT_FOUND,
INVALID_SHARE_SESSION_EPOCH. Per partition: UNKNOWN_TOPIC_ID,
KAFKA_STORAGE_ERROR (the segment cannot be read now), and for
acknowledgements INVALID_RECORD_STATE (offsets not acquired by the member)
or INVALID_REQUEST (a malformed batch).

On a cluster a share partition is served by its partition's leader (the
owner of its segment); another broker answers NOT_LEADER_OR_FOLLOWER for it
with the leader's id, epoch and address (KIP-951's hints, as Fetch gives,
``broker.kafka.leader_hints``). A leader takes any member id (as Kafka's
share-partition leader, which does not know the group's members: they are
the coordinator's); on a standalone, which coordinates every group, a member
not in the group gets UNKNOWN_MEMBER_ID.

A fetch acquires records of the session's partitions; with nothing acquired
it waits, up to ``max_wait``, for data at a partition's end, a release, or
the earliest lock to expire (never a timer loop). A request at epoch -1
applies its acknowledgements, releases what the member still holds and
closes the session.

Version 2 (Kafka 4.2): RENEW acknowledgements (type 4, KIP-1222) start the
records' locks again (in v1 type 4 is unknown: INVALID_REQUEST for the
partition); a ShareFetch with ``is_renew_ack`` only acknowledges (no fetch)
and must have ``max_wait``, ``min_bytes``, ``max_bytes`` and ``max_records``
0 (INVALID_REQUEST otherwise, as Kafka). ``share_acquire_mode`` 1
(record-limit, KIP-1206) acquires at most ``max_records`` records in the
whole answer, cutting a block (``max_records`` must then be positive); 0 (batch-optimized) acquires
whole blocks; any other mode is INVALID_REQUEST.
"""

from __future__ import annotations

import asyncio
import datetime
import uuid
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from broker.api import Isolation, SegmentHandle
from broker.errors import BrokerError
from broker.kafka.access import GROUP_CONSUME, TOPIC_CONSUME, allowed
from broker.kafka.context import NODE_ID, KafkaContext
from broker.kafka.dispatch import Api, Call
from broker.kafka.handlers.coordination import ZERO
from broker.kafka.handlers.fetch import MAX_FETCH_BYTES, MAX_WAIT_S, read_error_code
from broker.kafka.handlers.share_membership import NO_SHARE_GROUPS, shares_of
from broker.kafka.leader_epochs import leader_epoch
from broker.kafka.leader_hints import HINTED_CODES, LeaderHints
from broker.kafka.messages import build, nested, response_class
from broker.kafka.partitions import segment_name
from broker.kafka.share_groups.coordinator import ShareCoordinator
from broker.kafka.share_groups.partitions import AckBatch, Acquired, SharePartition
from broker.kafka.share_groups.sessions import CLOSE_EPOCH, SessionKey
from ledger.errors import LedgerError

__all__ = ["ROWS", "SHARE_ACKNOWLEDGE_KEY", "SHARE_FETCH_KEY"]

SHARE_FETCH_KEY = 78
SHARE_ACKNOWLEDGE_KEY = 79
#: Records one fetch acquires when the request asks none (Kafka's client default).
_DEFAULT_MAX_RECORDS = 500
#: ShareFetch v2's ``share_acquire_mode`` (Kafka's ``ShareAcquireMode``).
_BATCH_OPTIMIZED, _RECORD_LIMIT = 0, 1


@dataclass
class _Partition:
    topic_id: uuid.UUID
    topic: str
    partition: int
    error: ErrorCode = ErrorCode.none
    message: str | None = None
    ack_error: ErrorCode = ErrorCode.none
    ack_message: str | None = None
    acked: bool = False
    segment: SegmentHandle | None = None
    share: SharePartition | None = None
    acquired: Acquired = field(default_factory=Acquired)


class _Request:
    """The partitions of one request, by (topic name, partition), resolved from ids."""

    def __init__(self) -> None:
        self.parts: dict[SessionKey, _Partition] = {}
        self.ids: dict[str, uuid.UUID] = {}

    async def resolve(self, context: KafkaContext, topic_id: uuid.UUID | None,
                      number: int) -> _Partition:
        topic_id = topic_id or uuid.UUID(int=0)
        name = None
        error = ErrorCode.none
        try:
            name = await context.topic_ids.name_of(context.topics, topic_id)
        except (BrokerError, LedgerError) as failure:
            error = read_error_code(failure)
        if name is None:
            error = error if error is not ErrorCode.none else ErrorCode.unknown_topic_id
            name = f"\0{topic_id}"  # no topic: keyed by its id, never fetched
        self.ids[name] = topic_id
        part = self.parts.get((name, number))
        if part is None:
            part = self.parts[name, number] = _Partition(topic_id, name, number, error)
        return part


def _top(cls: Any, code: ErrorCode, message: str | None) -> Any:
    # (``acquisition_lock_timeout``: ShareFetch's, and ShareAcknowledge's from v2)
    return build(cls, throttle_time=ZERO, error_code=code, error_message=message,
                 responses=(), node_endpoints=(), acquisition_lock_timeout=ZERO)


def _v2_error(request: Any) -> str | None:
    """Why a ShareFetch's v2 fields are refused (INVALID_REQUEST), None if they are not."""
    mode = getattr(request, "share_acquire_mode", _BATCH_OPTIMIZED)
    if mode not in (_BATCH_OPTIMIZED, _RECORD_LIMIT):
        return (f"ShareAcquireMode {mode} is neither 0 (batch-optimized) nor 1 "
                "(record-limit)")
    if getattr(request, "is_renew_ack", False):
        if request.max_wait or request.min_bytes or request.max_bytes or request.max_records:
            return ("a renew-only ShareFetch (IsRenewAck) must have MaxWaitMs, MinBytes, "
                    "MaxBytes and MaxRecords 0")
    elif mode == _RECORD_LIMIT and request.max_records <= 0:
        return "MaxRecords must be positive in record-limit mode"
    return None


def _checked(context: KafkaContext, call: Call,
             ) -> tuple[ShareCoordinator | None, ErrorCode, str | None]:
    request = call.request
    if not allowed(context, call, GROUP_CONSUME, request.group_id or ""):
        return None, GROUP_CONSUME.refused, None
    shares = shares_of(context)
    if shares is None:
        return None, ErrorCode.unsupported_version, NO_SHARE_GROUPS
    if not request.group_id or not request.member_id:
        return None, ErrorCode.invalid_request, "GroupId and MemberId must be set."
    if shares.checks_members \
            and not shares.groups.is_member(request.group_id, request.member_id) \
            and request.share_session_epoch != CLOSE_EPOCH:
        return None, ErrorCode.unknown_member_id, (
            f"Member {request.member_id} is not a member of group {request.group_id}.")
    return shares, ErrorCode.none, None


async def _acknowledge(context: KafkaContext, call: Call, shares: ShareCoordinator,
                       request: _Request, topics: Any, partitions_field: str) -> None:
    """Apply the acknowledgements of ``topics`` (the request's), noting each partition's
    (RENEW a type from version 2 on)."""
    group_id, member_id = call.request.group_id, call.request.member_id
    for topic in topics:
        for entry in getattr(topic, partitions_field):
            part = await request.resolve(context, topic.topic_id, entry.partition_index)
            batches: list[AckBatch] = [(b.first_offset, b.last_offset, tuple(b.acknowledge_types))
                                       for b in entry.acknowledgement_batches]
            if not batches:
                continue
            part.acked = True
            if part.error is not ErrorCode.none:
                part.ack_error = part.error
                continue
            if not allowed(context, call, TOPIC_CONSUME, part.topic):
                part.ack_error = TOPIC_CONSUME.refused
                continue
            share = shares.partitions.get(group_id, part.topic, part.partition)
            if share is None and context.nodes is not None:
                try:  # led by another broker: NOT_LEADER_OR_FOLLOWER, with its hint
                    await context.topics.segment(segment_name(part.topic, part.partition))
                except (BrokerError, LedgerError) as error:
                    part.ack_error, part.ack_message = read_error_code(error), str(error)
                    continue
            if share is None:
                part.ack_error, part.ack_message = (
                    ErrorCode.invalid_record_state,
                    "no records of this partition were acquired by the member")
                continue
            part.ack_error, part.ack_message = await shares.partitions.acknowledge(
                share, member_id, batches, renew=call.version >= 2)


async def handle_share_fetch(context: KafkaContext, call: Call) -> Any:
    """Acknowledge, then acquire records of the session's partitions."""
    cls = response_class(SHARE_FETCH_KEY, call.version)
    request = call.request
    shares, code, message = _checked(context, call)
    if shares is None:
        return _top(cls, code, message)
    epoch = request.share_session_epoch
    has_acks = any(p.acknowledgement_batches for t in request.topics for p in t.partitions)
    if epoch == 0 and has_acks:
        return _top(cls, ErrorCode.invalid_request,
                    "Acknowledge data present on initial epoch.")
    refused = _v2_error(request)
    if refused is not None:
        return _top(cls, ErrorCode.invalid_request, refused)
    try:
        await shares.load_group(request.group_id)
    except (BrokerError, LedgerError) as error:
        return _top(cls, ErrorCode.coordinator_load_in_progress, str(error))
    wanted = _Request()
    listed = [(await wanted.resolve(context, t.topic_id, p.partition_index))
              for t in request.topics for p in t.partitions]
    forgotten = [(await wanted.resolve(context, t.topic_id, n))
                 for t in request.forgotten_topics_data for n in t.partitions]
    for part in forgotten:
        wanted.parts.pop((part.topic, part.partition), None)
    code, session = shares.sessions.advance(
        request.group_id, request.member_id, epoch,
        # (a partition of an unknown topic id is answered, never kept in the session)
        [(p.topic, p.partition) for p in listed if p.error is ErrorCode.none],
        [(p.topic, p.partition) for p in forgotten],
        may_open=True)
    if session is None:
        return _top(cls, code, None)
    await _acknowledge(context, call, shares, wanted, request.topics, "partitions")
    if epoch == CLOSE_EPOCH:
        for key in session.partitions:
            share = shares.partitions.get(request.group_id, *key)
            if share is not None:
                await shares.partitions.close_member(share, request.member_id)
    elif not getattr(request, "is_renew_ack", False):  # renew-only: no fetch (KIP-1222)
        await _fetch(context, call, shares, wanted, session.partitions)
    lock_ms = shares.config_of(request.group_id).record_lock_duration_ms
    return _answer(context, cls, wanted, datetime.timedelta(milliseconds=lock_ms))


async def _fetch(context: KafkaContext, call: Call, shares: ShareCoordinator,
                 wanted: _Request, keys: set[SessionKey]) -> None:
    request = call.request
    parts = []
    for topic, number in sorted(keys):
        part = wanted.parts.get((topic, number))
        if part is None:
            try:
                topic_id = uuid.UUID(await context.topics.topic_id(topic))
            except (BrokerError, LedgerError, ValueError):
                continue  # gone: a heartbeat takes it out of the assignment
            part = wanted.parts[topic, number] = _Partition(topic_id, topic, number)
        if part.error is not ErrorCode.none:
            continue
        if not allowed(context, call, TOPIC_CONSUME, topic):
            part.error = TOPIC_CONSUME.refused
            continue
        try:
            part.segment = await context.topics.segment(segment_name(topic, number))
            part.share = await shares.partitions.partition(request.group_id, topic, number,
                                                           part.segment)
        except (BrokerError, LedgerError) as error:
            part.error, part.message = read_error_code(error), str(error)
            continue
        parts.append(part)
    max_records = request.max_records if request.max_records > 0 else _DEFAULT_MAX_RECORDS
    record_limit = getattr(request, "share_acquire_mode", _BATCH_OPTIMIZED) == _RECORD_LIMIT
    budget = min(max(request.max_bytes, 1), MAX_FETCH_BYTES)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + min(max(request.max_wait.total_seconds(), 0.0), MAX_WAIT_S)
    while parts:
        # Record-limit: ``max_records`` bounds the whole answer, the partitions in turn.
        left = max_records
        for part in parts:
            share = part.share
            if part.segment is None or share is None or part.error is not ErrorCode.none \
                    or left <= 0:
                continue
            try:
                part.acquired = await shares.partitions.fetch(
                    share, part.segment, request.member_id,
                    left if record_limit else max_records, budget, record_limit=record_limit)
            except (BrokerError, LedgerError) as error:
                part.error, part.message = read_error_code(error), str(error)
            if record_limit:
                left -= sum(last - first + 1 for first, last, _ in part.acquired.ranges)
        remaining = deadline - loop.time()
        if any(p.acquired.ranges or p.error is not ErrorCode.none for p in parts) \
                or remaining <= 0 or context.stopping.is_set():
            return
        lock = shares.partitions.next_deadline([p.share for p in parts if p.share is not None])
        if lock is not None:
            remaining = min(remaining, max(lock - loop.time(), 0.0) + 0.001)
        await _wait_any(context, shares, parts, remaining,
                        shares.partitions.isolation_of(request.group_id))


async def _wait_any(context: KafkaContext, shares: ShareCoordinator,
                    parts: list[_Partition], timeout_s: float, isolation: Isolation) -> None:
    """Until data at a partition's end (if it may take more), a release, ``stopping``
    or ``timeout_s``."""
    waits: list[asyncio.Future[Any]] = [asyncio.ensure_future(context.stopping.wait())]
    for part in parts:
        if part.segment is not None and part.share is not None:
            if shares.partitions.may_read_more(part.share):
                waits.append(asyncio.ensure_future(part.segment.wait_for_data(
                    part.share.records.end, timeout_s, isolation)))
            waits.append(asyncio.ensure_future(asyncio.shield(part.share.released)))
    try:
        await asyncio.wait(waits, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for future in waits:
            future.cancel()
        await asyncio.gather(*waits, return_exceptions=True)


def _answer(context: KafkaContext, cls: Any, wanted: _Request,
            lock: datetime.timedelta) -> Any:
    topic_cls = nested(cls, "ShareFetchableTopicResponse")
    data_cls = nested(cls, "PartitionData")
    acquired_cls = nested(cls, "AcquiredRecords")
    leader_cls = nested(cls, "LeaderIdAndEpoch")
    hints = LeaderHints(context.nodes, cls, True)
    by_topic: dict[uuid.UUID, list[Any]] = {}
    for part in wanted.parts.values():
        if not (part.acquired.ranges or part.acked or part.error is not ErrorCode.none):
            continue
        by_topic.setdefault(part.topic_id, []).append(build(
            data_cls, partition_index=part.partition, error_code=part.error,
            error_message=part.message, acknowledge_error_code=part.ack_error.value,
            acknowledge_error_message=part.ack_message,
            current_leader=_leader(context, hints, leader_cls, part),
            records=b"".join(part.acquired.batches),
            acquired_records=tuple(
                build(acquired_cls, first_offset=first, last_offset=last,
                      delivery_count=count)
                for first, last, count in part.acquired.ranges)))
    return build(cls, throttle_time=ZERO, error_code=ErrorCode.none, error_message=None,
                 acquisition_lock_timeout=lock, responses=tuple(
                     build(topic_cls, topic_id=topic_id, partitions=tuple(items))
                     for topic_id, items in by_topic.items()),
                 node_endpoints=_endpoints(hints))


def _leader(context: KafkaContext, hints: LeaderHints, leader_cls: Any,
            part: _Partition) -> Any:
    """This broker for a partition it leads; for one another broker leads (refused
    NOT_LEADER_OR_FOLLOWER) that leader if known (a hint), else none (-1)."""
    if part.error is ErrorCode.unknown_topic_id:
        return build(leader_cls, leader_id=-1, leader_epoch=-1)
    error = part.error if part.error is not ErrorCode.none else part.ack_error
    if error in HINTED_CODES:
        hinted = hints.current_leader(part.topic, part.partition, error)
        return hinted.get("current_leader") or build(leader_cls, leader_id=-1,
                                                      leader_epoch=-1)
    node_id = NODE_ID if context.nodes is None else context.nodes.this_node().node_id
    return build(leader_cls, leader_id=node_id,
                 leader_epoch=leader_epoch(context.nodes, part.topic, part.partition))


def _endpoints(hints: LeaderHints) -> tuple[Any, ...]:
    endpoints: tuple[Any, ...] = hints.node_endpoints().get("node_endpoints", ())
    return endpoints


async def handle_share_acknowledge(context: KafkaContext, call: Call) -> Any:
    """Apply acknowledgements outside a fetch; epoch -1 closes the share session."""
    cls = response_class(SHARE_ACKNOWLEDGE_KEY, call.version)
    request = call.request
    shares, code, message = _checked(context, call)
    if shares is None:
        return _top(cls, code, message)
    code, session = shares.sessions.advance(request.group_id, request.member_id,
                                            request.share_session_epoch, (), (),
                                            may_open=False)
    if session is None:
        return _top(cls, code, None)
    wanted = _Request()
    await _acknowledge(context, call, shares, wanted, request.topics, "partitions")
    if request.share_session_epoch == CLOSE_EPOCH:
        for key in session.partitions:
            share = shares.partitions.get(request.group_id, *key)
            if share is not None:
                await shares.partitions.close_member(share, request.member_id)
    topic_cls = nested(cls, "ShareAcknowledgeTopicResponse")
    data_cls = nested(cls, "PartitionData")
    leader_cls = nested(cls, "LeaderIdAndEpoch")
    hints = LeaderHints(context.nodes, cls, True)
    by_topic: dict[uuid.UUID, list[Any]] = {}
    for part in wanted.parts.values():
        if part.acked:
            by_topic.setdefault(part.topic_id, []).append(build(
                data_cls, partition_index=part.partition, error_code=part.ack_error,
                error_message=part.ack_message,
                current_leader=_leader(context, hints, leader_cls, part)))
    lock_ms = shares.config_of(request.group_id).record_lock_duration_ms
    return build(cls, throttle_time=ZERO, error_code=ErrorCode.none, error_message=None,
                 acquisition_lock_timeout=datetime.timedelta(milliseconds=lock_ms),
                 responses=tuple(build(topic_cls, topic_id=topic_id, partitions=tuple(items))
                                 for topic_id, items in by_topic.items()),
                 node_endpoints=_endpoints(hints))


ROWS = (
    Api(SHARE_FETCH_KEY, "ShareFetch", 1, 2, handle_share_fetch),
    Api(SHARE_ACKNOWLEDGE_KEY, "ShareAcknowledge", 1, 2, handle_share_acknowledge),
)
