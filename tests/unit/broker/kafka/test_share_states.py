"""Share partitions' states for a group's coordinator (``broker.kafka.share_groups.admin``).

The remote side only (a fake ``PeerClients.share_state``): a share partition
another broker leads is asked of its owner, following a WrongHost to the owner
it names, asking again after no answer (every action is idempotent); a refusal
that is not retriable is raised; one nobody leads fails after the lookup's
deadline with a retriable error. Listing a group's share partitions asks every
container's owner once, and waits for a container with no owner.
"""

from __future__ import annotations

from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker._proto.v1 import kafka_internal_pb2
from broker.cluster.containers import OwnerRecord
from broker.errors import (
    BrokerShuttingDownError,
    InvalidArgumentError,
    NoSuchSegmentError,
    WrongHostError,
)
from broker.kafka.share_groups.admin import ShareStates, serve


class _Local:
    """The share partitions served here: none kept (listing them finds nothing)."""

    async def listed(self, group_id: str) -> list[tuple[str, int]]:
        return []


class _Peers:
    """The other brokers: each call's address, and what each answers in turn."""

    def __init__(self, *answers: Any) -> None:
        self.asked: list[tuple[str, int, str]] = []
        self._answers = list(answers)

    async def ask(self, address: str, request: kafka_internal_pb2.ShareStateRequest,
                  ) -> kafka_internal_pb2.ShareStateResponse:
        self.asked.append((address, request.action, request.segment))
        answer = self._answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        assert isinstance(answer, kafka_internal_pb2.ShareStateResponse)
        return answer


def _states(peers: _Peers, owner: str = "b:1", timeout_s: float = 5.0,
            containers: dict[int, str] | None = None) -> ShareStates:
    async def lookup(_segment: str) -> str:
        return owner

    known = containers if containers is not None else {0: "b:1", 1: "c:1"}

    def owner_of(container: int) -> OwnerRecord | None:
        address = known.get(container)
        return None if address is None else OwnerRecord(address, address)
    local: Any = _Local()
    return ShareStates(local, lambda _segment: False, lookup, (owner_of, 3), peers.ask,
                       serves_container=lambda container: container == 2,
                       timeout_s=timeout_s)


async def test_a_wrong_host_is_followed_and_no_answer_asked_again() -> None:
    peers = _Peers(WrongHostError("t/0", "c:1"), BrokerShuttingDownError("cut"),
                   kafka_internal_pb2.ShareStateResponse(start_offset=7, lag=3))
    assert await _states(peers).describe("g", "t", 0) == (7, 3)
    describe = kafka_internal_pb2.SHARE_STATE_DESCRIBE
    assert peers.asked == [("b:1", describe, "t/0"), ("c:1", describe, "t/0"),
                           ("b:1", describe, "t/0")]


async def test_a_reset_answers_the_leaders_kafka_error() -> None:
    peers = _Peers(kafka_internal_pb2.ShareStateResponse(
        error_code=ErrorCode.offset_out_of_range.value, error_message="outside [0, 5]"))
    assert await _states(peers).reset("g", "t", 0, 9) == (ErrorCode.offset_out_of_range,
                                                          "outside [0, 5]")


async def test_a_refusal_is_raised_and_no_leader_is_a_retriable_error() -> None:
    with pytest.raises(NoSuchSegmentError):
        await _states(_Peers(NoSuchSegmentError("t/9"))).forget("g", "t", 9)
    with pytest.raises(BrokerShuttingDownError, match="no broker serves it") as failed:
        await _states(_Peers(), owner="", timeout_s=0.3).forget("g", "t", 0)
    assert failed.value.retriable


async def test_listing_asks_each_owner_once_and_waits_for_an_owner() -> None:
    listed = kafka_internal_pb2.ShareStateResponse(partitions=[
        kafka_internal_pb2.SharePartitionName(topic="t", partition=1)])
    peers = _Peers(listed, kafka_internal_pb2.ShareStateResponse())
    assert await _states(peers).listed("g") == [("t", 1)]
    assert sorted(address for address, _, _ in peers.asked) == ["b:1", "c:1"]
    with pytest.raises(BrokerShuttingDownError, match=r"containers \[1\] have no owner"):
        await _states(_Peers(), containers={0: "b:1"}, timeout_s=0.3).listed("g")


async def test_the_leader_refuses_a_request_without_group_or_segment() -> None:
    local: Any = _Local()
    with pytest.raises(InvalidArgumentError):
        await serve(local, kafka_internal_pb2.ShareStateRequest(
            action=kafka_internal_pb2.SHARE_STATE_LIST))
    with pytest.raises(InvalidArgumentError):
        await serve(local, kafka_internal_pb2.ShareStateRequest(
            group_id="g", action=kafka_internal_pb2.SHARE_STATE_DESCRIBE, segment="t"))
