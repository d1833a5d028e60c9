"""The ``folio.v1.ReaderGroups`` servicer: reader group states by compare-and-set.

Thin: decode, call the ``ReaderGroupStore`` (or, for heartbeats and member
liveness, the ``GroupLiveness``), encode. On create the topics the state
names must exist (NOT_FOUND otherwise).
"""

from __future__ import annotations

from typing import Any

import grpc

from broker.api import Topics
from broker.errors import BrokerError, InvalidArgumentError
from broker.groups.kafka_view import (
    KafkaGroupDetail,
    KafkaGroupsSlot,
    KafkaPartitionLag,
    OffsetReset,
    ResetTo,
    kafka_group_not_found,
)
from broker.groups.liveness import GroupLiveness
from broker.groups.store import GroupRecord, ReaderGroupStore
from broker.services._servicer import abort_with
from folio.api.v1 import groups_pb2, groups_pb2_grpc
from ledger.errors import LedgerError

__all__ = ["ReaderGroupsServicer"]

_Context = grpc.aio.ServicerContext[Any, Any]
_Refusals = (BrokerError, LedgerError)
_TO = groups_pb2.ResetKafkaGroupRequest
_RESET_TO: dict[int, ResetTo] = {
    _TO.TO_EARLIEST: "earliest", _TO.TO_LATEST: "latest", _TO.TO_OFFSET: "offset",
    _TO.TO_SHIFT: "shift", _TO.TO_TIMESTAMP: "timestamp", _TO.TO_CURRENT: "current",
    _TO.TO_OFFSETS: "offsets"}


def _reply(record: GroupRecord) -> groups_pb2.ReaderGroup:
    return groups_pb2.ReaderGroup(name=record.name, version=record.version, state=record.state)


def _kafka_reply(detail: KafkaGroupDetail) -> groups_pb2.KafkaGroupDescription:
    return groups_pb2.KafkaGroupDescription(
        name=detail.name, state=detail.state, protocol_type=detail.protocol_type,
        protocol=detail.protocol, generation=detail.generation, lag=detail.lag,
        members=[groups_pb2.KafkaGroupMember(
            member_id=m.member_id, group_instance_id=m.group_instance_id,
            client_id=m.client_id, client_host=m.client_host,
            assigned=[groups_pb2.KafkaTopicPartition(topic=t, partition=p)
                      for t, p in m.assigned]) for m in detail.members],
        partitions=[_lag_reply(p) for p in detail.partitions],
        reset=[_lag_reply(p) for p in detail.reset])


def _lag_reply(p: KafkaPartitionLag) -> groups_pb2.KafkaPartitionLag:
    return groups_pb2.KafkaPartitionLag(
        topic=p.topic, partition=p.partition, committed_offset=p.committed_offset,
        end_offset=p.end_offset, lag=p.lag, member_id=p.member_id, metadata=p.metadata)


class ReaderGroupsServicer(groups_pb2_grpc.ReaderGroupsServicer):
    """Create, get, conditionally update, delete and list reader groups."""

    def __init__(self, topics: Topics, store: ReaderGroupStore,
                 liveness: GroupLiveness | None = None,
                 kafka: KafkaGroupsSlot | None = None) -> None:
        self._topics = topics
        self._store = store
        self._kafka = kafka or KafkaGroupsSlot()
        # Without one started by the caller, heartbeats are recorded but no
        # member is ever declared offline.
        self._liveness = liveness or GroupLiveness(store)

    async def CreateReaderGroup(
        self, request: groups_pb2.CreateReaderGroupRequest, context: _Context
    ) -> groups_pb2.ReaderGroup:
        try:
            for topic in request.state.topics:
                await self._topics.get_topic(topic)
            record = await self._store.create(request.name, request.state)
        except _Refusals as error:
            await abort_with(context, error)
        return _reply(record)

    async def GetReaderGroup(
        self, request: groups_pb2.GetReaderGroupRequest, context: _Context
    ) -> groups_pb2.ReaderGroup:
        try:
            record = await self._store.get(request.name)
        except _Refusals as error:
            await abort_with(context, error)
        return _reply(record)

    async def UpdateReaderGroup(
        self, request: groups_pb2.UpdateReaderGroupRequest, context: _Context
    ) -> groups_pb2.ReaderGroup:
        try:
            record = await self._store.update(request.name, request.expected_version,
                                              request.state)
        except _Refusals as error:
            await abort_with(context, error)
        return _reply(record)

    async def DeleteReaderGroup(
        self, request: groups_pb2.DeleteReaderGroupRequest, context: _Context
    ) -> groups_pb2.DeleteReaderGroupResponse:
        try:
            await self._store.delete(request.name)
        except _Refusals as error:
            await abort_with(context, error)
        return groups_pb2.DeleteReaderGroupResponse()

    async def ListReaderGroups(
        self, request: groups_pb2.ListReaderGroupsRequest, context: _Context
    ) -> groups_pb2.ListReaderGroupsResponse:
        try:
            names = await self._store.names()
        except _Refusals as error:
            await abort_with(context, error)
        return groups_pb2.ListReaderGroupsResponse(names=names)

    async def Heartbeat(
        self, request: groups_pb2.HeartbeatRequest, context: _Context
    ) -> groups_pb2.HeartbeatResponse:
        try:
            member, timeout_ms = await self._liveness.heartbeat(
                request.name, request.reader_id, request.session_id,
                {p.segment: p.offset for p in request.positions})
        except _Refusals as error:
            await abort_with(context, error)
        return groups_pb2.HeartbeatResponse(member=member, session_timeout_ms=timeout_ms)

    async def GetMembers(
        self, request: groups_pb2.GetMembersRequest, context: _Context
    ) -> groups_pb2.GetMembersResponse:
        try:
            timeout_ms, members = await self._liveness.members(request.name)
        except _Refusals as error:
            await abort_with(context, error)
        return groups_pb2.GetMembersResponse(session_timeout_ms=timeout_ms, members=[
            groups_pb2.MemberLiveness(
                reader_id=m.reader_id, session_id=m.session_id, silent_ms=m.silent_ms,
                heartbeated=m.heartbeated,
                reported_positions=[groups_pb2.SegmentOffset(segment=s, offset=o)
                                    for s, o in sorted(m.reported.items())])
            for m in members])

    async def ListKafkaGroups(
        self, request: groups_pb2.ListKafkaGroupsRequest, context: _Context
    ) -> groups_pb2.ListKafkaGroupsResponse:
        source = self._kafka.source
        if source is None:  # no Kafka listener (yet): no Kafka group anywhere here
            return groups_pb2.ListKafkaGroupsResponse(complete=True)
        found, complete = source.listing()
        return groups_pb2.ListKafkaGroupsResponse(complete=complete, groups=[
            groups_pb2.KafkaGroupListing(name=g.name, state=g.state,
                                         protocol_type=g.protocol_type,
                                         member_count=g.member_count) for g in found])

    async def DescribeKafkaGroup(
        self, request: groups_pb2.DescribeKafkaGroupRequest, context: _Context
    ) -> groups_pb2.KafkaGroupDescription:
        source = self._kafka.source
        try:
            if source is None:
                raise kafka_group_not_found(request.name)
            detail = await source.describe(request.name)
        except _Refusals as error:
            await abort_with(context, error)
        return _kafka_reply(detail)

    async def DeleteKafkaGroup(
        self, request: groups_pb2.DeleteKafkaGroupRequest, context: _Context
    ) -> groups_pb2.DeleteKafkaGroupResponse:
        source = self._kafka.source
        try:
            if source is None:
                raise kafka_group_not_found(request.name)
            await source.delete(request.name)
        except _Refusals as error:
            await abort_with(context, error)
        return groups_pb2.DeleteKafkaGroupResponse()

    async def ResetKafkaGroup(
        self, request: groups_pb2.ResetKafkaGroupRequest, context: _Context
    ) -> groups_pb2.KafkaGroupDescription:
        source = self._kafka.source
        try:
            spec = _offset_reset(request)
            if source is None:
                raise kafka_group_not_found(request.name)
            detail = await source.reset(request.name, spec)
        except _Refusals as error:
            await abort_with(context, error)
        return _kafka_reply(detail)


def _offset_reset(request: groups_pb2.ResetKafkaGroupRequest) -> OffsetReset:
    """The reset a request asks for; ``InvalidArgumentError`` for one that asks none."""
    to = _RESET_TO.get(request.to)
    if to is None:
        raise InvalidArgumentError("ResetKafkaGroup needs `to`: TO_EARLIEST, TO_LATEST, "
                                   "TO_OFFSET, TO_SHIFT, TO_TIMESTAMP, TO_CURRENT or TO_OFFSETS")
    value = {"offset": request.offset, "shift": request.shift_by,
             "timestamp": request.timestamp_ms}.get(to, 0)
    if to in ("offset", "timestamp") and value < 0:
        raise InvalidArgumentError(f"ResetKafkaGroup: a negative {to} ({value})")
    if to == "offsets" and not request.offsets:
        raise InvalidArgumentError("ResetKafkaGroup TO_OFFSETS needs `offsets`")
    negative = [f"{o.topic}/{o.partition}" for o in request.offsets if o.offset < 0]
    if negative:
        raise InvalidArgumentError(f"ResetKafkaGroup: negative offsets for {negative}")
    return OffsetReset(
        to, tuple(request.topics), tuple((p.topic, p.partition) for p in request.partitions),
        value, tuple((o.topic, o.partition, o.offset) for o in request.offsets),
        request.dry_run)
