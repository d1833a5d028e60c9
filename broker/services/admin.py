"""The ``folio.v1.Admin`` servicer: decode, call ``Topics``, encode. No logic of its own."""

from __future__ import annotations

from typing import Any

import grpc

from broker.api import TopicConfig, Topics
from broker.auth.acl_store import AclStore
from broker.cluster.owners import SegmentOwners, SingleBroker
from broker.errors import BrokerError, InvalidArgumentError
from broker.services._servicer import abort_with
from broker.services.convert import (
    config_changes,
    segment_info_message,
    segment_message,
    topic_message,
)
from broker.services.permissions import PermissionCalls
from folio.api.v1 import admin_pb2, admin_pb2_grpc
from ledger.errors import LedgerError

__all__ = ["AdminServicer"]

_Context = grpc.aio.ServicerContext[Any, Any]
_Refusals = (BrokerError, LedgerError)


class AdminServicer(PermissionCalls, admin_pb2_grpc.AdminServicer):
    """Topics and segments: create, describe, configure, truncate, delete; permissions.

    ``owners`` says who serves each segment (``broker.cluster``; None: this
    broker, at no known address). ``acls``: the grants (``broker.auth``);
    None: the permission calls are refused.
    """

    def __init__(self, topics: Topics, owners: SegmentOwners | None = None,
                 acls: AclStore | None = None) -> None:
        self._topics = topics
        self._owners: SegmentOwners = owners if owners is not None else SingleBroker()
        self._owner_of = self._owners.owner_of
        self._acls = acls

    async def CreateTopic(
        self, request: admin_pb2.CreateTopicRequest, context: _Context
    ) -> admin_pb2.Topic:
        try:
            changes = config_changes(request.config)
            try:
                config = TopicConfig(**{**_as_dict(self._topics.default_config()), **changes})
            except ValueError as error:
                raise InvalidArgumentError(str(error)) from None
            topic = await self._topics.create_topic(
                request.name, request.segment_count or 1, config)
        except _Refusals as error:
            await abort_with(context, error)
        return topic_message(topic, self._owner_of)

    async def GetTopic(
        self, request: admin_pb2.GetTopicRequest, context: _Context
    ) -> admin_pb2.Topic:
        try:
            topic = await self._topics.get_topic(request.name)
        except _Refusals as error:
            await abort_with(context, error)
        return topic_message(topic, self._owner_of)

    async def ListTopics(
        self, request: admin_pb2.ListTopicsRequest, context: _Context
    ) -> admin_pb2.ListTopicsResponse:
        try:
            topics = await self._topics.list_topics(include_internal=request.include_internal)
        except _Refusals as error:
            await abort_with(context, error)
        return admin_pb2.ListTopicsResponse(
            topics=[topic_message(topic, self._owner_of) for topic in topics])

    async def DeleteTopic(
        self, request: admin_pb2.DeleteTopicRequest, context: _Context
    ) -> admin_pb2.DeleteTopicResponse:
        try:
            await self._topics.delete_topic(request.name)
        except _Refusals as error:
            await abort_with(context, error)
        return admin_pb2.DeleteTopicResponse()

    async def UpdateTopicConfig(
        self, request: admin_pb2.UpdateTopicConfigRequest, context: _Context
    ) -> admin_pb2.Topic:
        try:
            topic = await self._topics.update_topic_config(
                request.name, config_changes(request.config))
        except _Refusals as error:
            await abort_with(context, error)
        return topic_message(topic, self._owner_of)

    async def GetSegments(
        self, request: admin_pb2.GetSegmentsRequest, context: _Context
    ) -> admin_pb2.GetSegmentsResponse:
        try:
            segments = await self._topics.list_segments(
                request.topic, include_sealed=request.include_sealed)
        except _Refusals as error:
            await abort_with(context, error)
        return admin_pb2.GetSegmentsResponse(
            segments=[segment_message(segment, self._owner_of) for segment in segments])

    async def GetSegmentInfo(
        self, request: admin_pb2.GetSegmentInfoRequest, context: _Context
    ) -> admin_pb2.SegmentInfo:
        try:
            segment = await self._topics.segment(request.segment)
            info = segment.info()
        except _Refusals as error:
            await abort_with(context, error)
        return segment_info_message(info, self._owner_of)

    async def TruncateSegment(
        self, request: admin_pb2.TruncateSegmentRequest, context: _Context
    ) -> admin_pb2.SegmentInfo:
        try:
            segment = await self._topics.writable_segment(request.segment, "TruncateSegment")
            info = await segment.truncate(request.offset)
        except _Refusals as error:
            await abort_with(context, error)
        return segment_info_message(info, self._owner_of)

    async def ScaleTopic(
        self, request: admin_pb2.ScaleTopicRequest, context: _Context
    ) -> admin_pb2.ScaleTopicResponse:
        try:
            outcome = await self._topics.scale_topic(
                request.topic, list(request.seal),
                [(r.low, r.high) for r in request.new_ranges])
        except _Refusals as error:
            await abort_with(context, error)
        return admin_pb2.ScaleTopicResponse(
            sealed=[segment_message(s, self._owner_of) for s in outcome.sealed],
            created=[segment_message(s, self._owner_of) for s in outcome.created])

    async def GetSuccessors(
        self, request: admin_pb2.GetSuccessorsRequest, context: _Context
    ) -> admin_pb2.GetSuccessorsResponse:
        try:
            segment, successors = await self._topics.get_successors(request.segment)
        except _Refusals as error:
            await abort_with(context, error)
        return admin_pb2.GetSuccessorsResponse(
            segment=segment_message(segment, self._owner_of),
            successors=[segment_message(s, self._owner_of) for s in successors])

    async def SealTopic(
        self, request: admin_pb2.SealTopicRequest, context: _Context
    ) -> admin_pb2.Topic:
        try:
            topic = await self._topics.seal_topic(request.name)
        except _Refusals as error:
            await abort_with(context, error)
        return topic_message(topic, self._owner_of)

    async def LookupSegment(
        self, request: admin_pb2.LookupSegmentRequest, context: _Context
    ) -> admin_pb2.LookupSegmentResponse:
        try:
            segment, _successors = await self._topics.get_successors(request.segment)
        except _Refusals as error:
            await abort_with(context, error)
        return admin_pb2.LookupSegmentResponse(
            segment=segment.name, owner=await self._owners.lookup(segment.name))

    async def ListBrokers(
        self, request: admin_pb2.ListBrokersRequest, context: _Context
    ) -> admin_pb2.ListBrokersResponse:
        return admin_pb2.ListBrokersResponse(
            brokers=[admin_pb2.Broker(id=broker.id, address=broker.address,
                                      containers=broker.containers)
                     for broker in self._owners.brokers()],
            container_count=self._owners.container_count)


def _as_dict(config: TopicConfig) -> dict[str, int]:
    return {name: getattr(config, name) for name in TopicConfig.__dataclass_fields__}
