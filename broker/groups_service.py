"""The ``folio.v1.ReaderGroups`` servicer: reader group states by compare-and-set.

Thin: decode, call the ``ReaderGroupStore``, encode. On create the topics the
state names must exist (NOT_FOUND otherwise).
"""

from __future__ import annotations

from typing import Any

import grpc

from broker._servicer import abort_with
from broker.api import Topics
from broker.errors import BrokerError
from broker.groups_store import GroupRecord, ReaderGroupStore
from folio.api.v1 import groups_pb2, groups_pb2_grpc
from ledger.errors import LedgerError

__all__ = ["ReaderGroupsServicer"]

_Context = grpc.aio.ServicerContext[Any, Any]
_Refusals = (BrokerError, LedgerError)


def _reply(record: GroupRecord) -> groups_pb2.ReaderGroup:
    return groups_pb2.ReaderGroup(name=record.name, version=record.version, state=record.state)


class ReaderGroupsServicer(groups_pb2_grpc.ReaderGroupsServicer):
    """Create, get, conditionally update, delete and list reader groups."""

    def __init__(self, topics: Topics, store: ReaderGroupStore) -> None:
        self._topics = topics
        self._store = store

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
