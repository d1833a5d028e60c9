"""The client's brokers without a broker: addresses, endpoint lists, routing, moving flows.

Channels connect lazily, so pools to addresses nobody listens on can be made
and compared. What needs a broker answering (bootstrap, LookupSegment,
WrongHost followed end to end) is in tests/integration/test_cluster_client.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from folio._transport.append_stream import AppendStream
from folio._transport.brokers import Brokers, address_key, parse_endpoints
from folio._transport.io_thread import IoThread
from folio.api.v1 import admin_pb2
from folio.config import ClientConfig
from folio.errors import FolioError, InvalidArgumentError, WrongHostError
from tests.support.wait import wait_for


@pytest.fixture
def io() -> Iterator[IoThread]:
    thread = IoThread("test-brokers")
    yield thread
    thread.close()


async def _made(endpoints: tuple[str, ...]) -> Brokers:
    return Brokers(endpoints, 2)


def brokers_of(io: IoThread, *endpoints: str) -> Brokers:
    return io.run(_made(endpoints), timeout=10)


async def _call(function: Any, *args: Any) -> Any:
    return function(*args)


def on_io(io: IoThread, function: Any, *args: Any) -> Any:
    """``function(*args)`` run on the IO thread (where ``Brokers`` lives)."""
    return io.run(_call(function, *args), timeout=10)


@pytest.mark.parametrize(("one", "other"), [
    ("localhost:7070", "127.0.0.1:7070"),
    ("LOCALHOST:7070", "[::1]:7070"),
    ("0.0.0.0:7070", "127.0.1.1:7070"),
    ("Broker-1.example:7070", "broker-1.example:7070"),
    ("[fe80::1]:7070", "FE80::1:7070"),
])
def test_spellings_of_one_broker_are_one_address(one: str, other: str) -> None:
    assert address_key(one) == address_key(other)


@pytest.mark.parametrize(("one", "other"), [
    ("localhost:7070", "localhost:7071"),
    ("broker-1:7070", "broker-2:7070"),
    ("10.0.0.1:7070", "127.0.0.1:7070"),
])
def test_different_brokers_are_different_addresses(one: str, other: str) -> None:
    assert address_key(one) != address_key(other)


def test_an_endpoint_list_is_stripped_in_order_without_repeats() -> None:
    assert parse_endpoints(" b:1, a:2 ,localhost:3,127.0.0.1:3,") == ("b:1", "a:2", "localhost:3")
    assert parse_endpoints("only:1") == ("only:1",)


@pytest.mark.parametrize("text", ["", ",", " , ,"])
def test_a_list_naming_no_endpoint_is_refused(text: str) -> None:
    with pytest.raises(InvalidArgumentError, match="names no broker"):
        parse_endpoints(text)
    with pytest.raises(InvalidArgumentError):
        ClientConfig(endpoint=text)


def test_one_endpoint_routes_everything_to_it_whatever_the_owners(io: IoThread) -> None:
    brokers = brokers_of(io, "localhost:7070")
    brokers.learn([("t/0", "10.1.1.1:7070")])
    assert not brokers.cluster
    assert on_io(io, brokers.owner_pool, "t/0") is brokers.admin_pool
    assert list(brokers.pool_stats()) == ["localhost:7070"]
    io.run(brokers.close(), timeout=10)


def test_after_wrong_host_segments_go_to_their_owners_one_pool_per_broker(io: IoThread) -> None:
    brokers = brokers_of(io, "localhost:7070")
    brokers.learn([("t/0", "127.0.0.1:7070"), ("t/1", "127.0.0.1:7071")])
    on_io(io, brokers.moved, "t/2", "127.0.0.1:7072")
    assert brokers.cluster
    # t/0's owner is the endpoint under another spelling: the same pool.
    assert on_io(io, brokers.owner_pool, "t/0") is brokers.admin_pool
    assert on_io(io, brokers.owner_pool, "t/1").endpoint == "127.0.0.1:7071"
    assert on_io(io, brokers.owner_pool, "t/2").endpoint == "127.0.0.1:7072"
    assert on_io(io, brokers.owner_pool, "t/9") is brokers.admin_pool  # unknown: admin
    on_io(io, brokers.moved, "t/1", "")  # WrongHost without an owner: forgotten
    assert brokers.owner_of("t/1") is None
    assert sorted(brokers.pool_stats()) == ["127.0.0.1:7071", "127.0.0.1:7072",
                                            "localhost:7070"]
    io.run(brokers.close(), timeout=10)


def test_a_standalone_listed_alone_is_the_endpoint_it_was_reached_at(io: IoThread) -> None:
    brokers = brokers_of(io, "dead:1", "my-host:7070")
    answer = admin_pb2.ListBrokersResponse(
        brokers=[admin_pb2.Broker(id="standalone", address="10.9.9.9:7070")])
    brokers._learn_brokers("my-host:7070", answer)
    assert not brokers.cluster
    assert address_key("10.9.9.9:7070") != address_key("my-host:7070")
    assert on_io(io, brokers.pool, "10.9.9.9:7070") is on_io(io, brokers.pool, "my-host:7070")
    io.run(brokers.close(), timeout=10)


def test_a_cluster_listing_is_learnt_as_failover_candidates(io: IoThread) -> None:
    brokers = brokers_of(io, "a:1", "b:1")
    answer = admin_pb2.ListBrokersResponse(brokers=[
        admin_pb2.Broker(id="1", address="a:1"), admin_pb2.Broker(id="3", address="c:1")],
        container_count=16)
    brokers._learn_brokers("a:1", answer)
    assert brokers.cluster
    assert brokers._candidates == ["a:1", "b:1", "c:1"]
    assert brokers._next_admin({address_key("a:1")}) == "b:1"
    assert brokers._next_admin({address_key("a:1"), address_key("b:1")}) == "c:1"
    assert brokers._next_admin({address_key(a) for a in ("a:1", "b:1", "c:1")}) is None
    io.run(brokers.close(), timeout=10)


def test_a_broker_named_later_as_an_owner_is_a_failover_candidate_too(io: IoThread) -> None:
    # A newcomer that joined after bootstrap: once a WrongHost or a lookup names
    # it (its pool is made), admin calls may fail over to it, so a client whose
    # bootstrap brokers all died since can still look owners up.
    brokers = brokers_of(io, "a:1", "b:1")
    on_io(io, brokers.moved, "t/0", "localhost:7")
    on_io(io, brokers.owner_pool, "t/0")
    on_io(io, brokers.pool, "127.0.0.1:7")  # the same broker spelt otherwise: once
    assert brokers._candidates == ["a:1", "b:1", "localhost:7"]
    assert brokers._next_admin({address_key("a:1"), address_key("b:1")}) == "localhost:7"
    io.run(brokers.close(), timeout=10)


class MovingRecorder:
    """A flow that records how it was moved."""

    segment = "t/0"

    def __init__(self, wants: bool = True) -> None:
        self.wants = wants
        self.moved_to: list[tuple[AppendStream, int]] = []
        self.failed: list[FolioError] = []

    def on_reply(self, reply: object) -> None: ...
    def on_stream_ready(self) -> None: ...
    def on_stream_lost(self, error: FolioError) -> None: ...
    def on_tick(self, now: float) -> None: ...

    def on_moved(self, stream: AppendStream, flow_id: int) -> bool:
        self.moved_to.append((stream, flow_id))
        return self.wants

    def on_move_failed(self, error: FolioError) -> None:
        self.failed.append(error)


def test_wrong_host_naming_the_owner_registers_the_flow_on_the_owners_stream(
        io: IoThread) -> None:
    brokers = brokers_of(io, "127.0.0.1:1")
    flow = MovingRecorder()
    old_stream, old_id = on_io(io, brokers.open_flow, flow)
    assert old_stream.flow_count == 1
    error = WrongHostError("moved", segment="t/0", owner="127.0.0.1:2")
    on_io(io, brokers.follow, flow, old_stream, old_id, error, 0.0)
    assert old_stream.flow_count == 0
    [(stream, flow_id)] = flow.moved_to
    owner_pool = on_io(io, brokers.pool, "127.0.0.1:2")
    assert stream is owner_pool.admin.append_stream
    assert stream.flow_count == 1 and flow_id >= 1
    # Moved again at once (two brokers naming each other): after a backoff.
    on_io(io, brokers.follow, flow, stream, flow_id,
          WrongHostError("moved", segment="t/0", owner="127.0.0.1:1"), 0.0)
    assert len(flow.moved_to) == 1
    wait_for(lambda: len(flow.moved_to) == 2, "the second move, after its backoff")
    assert flow.moved_to[1][0] is brokers.admin.append_stream
    # A flow released while moving does not keep its new registration.
    gone = MovingRecorder(wants=False)
    gone.segment = "t/1"
    on_io(io, brokers.follow, gone, None, 0,
          WrongHostError("moved", segment="t/1", owner="127.0.0.1:3"), 0.0)
    assert len(gone.moved_to) == 1
    assert on_io(io, brokers.pool, "127.0.0.1:3").stats().flows == 0
    io.run(brokers.close(), timeout=10)
