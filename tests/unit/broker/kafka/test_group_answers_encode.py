"""Group answers while no coordinator is served here encode at every version.

Issue 22, the nemesis (seed 3): while ZooKeeper restarted, JoinGroup v5
requests were answered COORDINATOR_NOT_AVAILABLE with ``protocol_name`` None,
a field not nullable before v7: the answer failed to encode, the broker
logged "unexpected error" and closed the consumer's connection.
"""

from __future__ import annotations

import io
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.kafka.context import KafkaContext
from broker.kafka.dispatch import Call
from broker.kafka.handlers.group_membership import (
    JOIN_GROUP_KEY,
    SYNC_GROUP_KEY,
    handle_join_group,
    handle_sync_group,
)
from broker.kafka.messages import build, encode_entity, nested, request_class, response_class
from broker.kafka.producer_ids import ProducerIds
from broker.topics.manager import TopicManager
from tests.unit.broker.conftest import BrokerEnv


def _join(version: int) -> Any:
    cls = request_class(JOIN_GROUP_KEY, version)
    protocol = build(nested(cls, "JoinGroupRequestProtocol"), name="range", metadata=b"")
    return build(cls, group_id="g", session_timeout=10_000, rebalance_timeout=10_000,
                 member_id="", group_instance_id=None, protocol_type="consumer",
                 protocols=(protocol,), reason=None)


def _sync(version: int) -> Any:
    cls = request_class(SYNC_GROUP_KEY, version)
    return build(cls, group_id="g", generation_id=1, member_id="m", group_instance_id=None,
                 protocol_type="consumer", protocol_name="range", assignments=())


@pytest.mark.parametrize(("key", "versions", "request_of", "handler"), [
    (JOIN_GROUP_KEY, range(0, 10), _join, handle_join_group),
    (SYNC_GROUP_KEY, range(0, 6), _sync, handle_sync_group),
])
async def test_coordinator_not_available_answers_encode(
        env: BrokerEnv, topics: TopicManager, key: int, versions: range,
        request_of: Callable[[int], Any],
        handler: Callable[[KafkaContext, Call], Awaitable[Any]]) -> None:
    context = KafkaContext(topics, "127.0.0.1", ProducerIds(env.store))  # coordinators: None
    for version in versions:
        answer = await handler(context, Call(key, version, 1, "test", request_of(version), None))
        assert answer.error_code == ErrorCode.coordinator_not_available, version
        out = io.BytesIO()
        encode_entity(response_class(key, version), answer, out)  # raised TypeError at v0-v6
        assert out.getvalue(), version
