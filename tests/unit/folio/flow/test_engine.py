"""The flow engine on its own (folio._flow.engine), with a plain recording policy.

Runs on the test's event loop: no IO thread. The stream is a recording
stand-in and the test plays the broker.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, cast

import pytest

from folio._flow.engine import FlowEngine
from folio._transport.brokers import Brokers
from folio._transport.flow_state import FlowState, FlowStateError
from folio.api.v1 import append_pb2
from folio.errors import FolioUnavailableError, NoSuchSegmentError, WrongHostError
from tests.unit.folio.flow.stand_ins import (
    SEGMENT,
    Plain,
    Stream,
    Unit,
    ack,
    refuse,
    settle,
    setup,
    state,
)

log = logging.getLogger(__name__)


async def _engine(window: int = 100) -> tuple[FlowEngine[Unit], Plain, Stream]:
    policy = Plain(window)
    stream = Stream()
    engine: FlowEngine[Unit] = FlowEngine(SEGMENT, writer_id="w", source=stream,
                                          policy=policy, log=log)
    assert engine.start() is None
    assert state(engine) is FlowState.DISCONNECTED
    await settle()  # the stream tells the flow it is open: SetupAppend
    assert state(engine) is FlowState.SETTING_UP
    return engine, policy, stream


async def test_units_wait_for_the_setup_then_are_numbered_from_its_answer() -> None:
    engine, policy, stream = await _engine()
    engine.submit([Unit("a", 2), Unit("b", 3)])
    assert stream.blocks() == []
    setup(engine, stream, last_event_number=9)
    assert state(engine) is FlowState.READY
    assert [(b.data, b.last_event_number, b.end) for b in stream.blocks()] == [
        (b"a", 11, True), (b"b", 14, True)]
    ack(engine, stream.of("append_block")[0], offset=100)
    assert policy.acked == [("a", 100)] and len(engine.units) == 1


async def test_a_lost_stream_settles_by_the_setup_and_resends_the_rest_with_their_numbers(
        ) -> None:
    engine, policy, stream = await _engine()
    setup(engine, stream)
    engine.submit([Unit("a"), Unit("b"), Unit("c")])
    first = stream.of("append_block")
    stream.connected = False
    engine.on_stream_lost(FolioUnavailableError("cut"))
    assert state(engine) is FlowState.DISCONNECTED and engine.down_since is not None
    ack(engine, first[2], offset=7)  # an answer of the lost generation: ignored
    assert policy.acked == []
    stream.connected = True
    engine.on_stream_ready()
    setup(engine, stream, last_event_number=0)  # "a" was written, its answer lost
    assert policy.acked == [("a", -1)]
    resent = stream.blocks()[3:]
    assert [(b.data, b.last_event_number) for b in resent] == [(b"b", 1), (b"c", 2)]
    assert (engine.settled_by_setup, engine.resent) == (1, 2)
    assert engine.down_since is None


async def test_a_retriable_refusal_sets_up_again_after_a_backoff() -> None:
    engine, policy, stream = await _engine()
    setup(engine, stream)
    engine.submit([Unit("a")])
    refuse(engine, stream.of("append_block")[0], retriable=True)
    assert state(engine) is FlowState.RESETTING and len(policy.refusals) == 1
    deadline = asyncio.get_running_loop().time() + 5
    while len(stream.of("setup_append")) < 2:  # the backoff is at most 50 ms here
        assert asyncio.get_running_loop().time() < deadline, "no setup after the backoff"
        await asyncio.sleep(0.01)
    setup(engine, stream)
    again = stream.of("append_block")[-1]
    assert again.append_block.last_event_number == 0  # the same unit, the same number
    ack(engine, again, offset=0)
    assert policy.acked == [("a", 0)]


async def test_the_window_holds_units_back_until_an_answer() -> None:
    engine, _, stream = await _engine(window=2)
    setup(engine, stream)
    engine.submit([Unit("a"), Unit("b"), Unit("c")])
    assert [b.data for b in stream.blocks()] == [b"a", b"b"]
    ack(engine, stream.of("append_block")[0], offset=0)
    assert [b.data for b in stream.blocks()] == [b"a", b"b", b"c"]


async def test_die_abandons_every_unit_in_order_and_leaves_the_stream() -> None:
    engine, policy, stream = await _engine()
    setup(engine, stream)
    engine.submit([Unit("a"), Unit("b")])
    error = NoSuchSegmentError("gone", segment=SEGMENT)
    engine.die(error)
    assert state(engine) is FlowState.CLOSED and engine.dead is error
    assert policy.abandoned == [("a", error), ("b", error)]
    assert stream.flows == {}
    engine.die(FolioUnavailableError("again"))  # once CLOSED, nothing more
    engine.on_stream_ready()
    assert engine.dead is error and len(stream.of("setup_append")) == 1
    assert engine.release() == []


async def test_release_hands_back_what_was_not_settled() -> None:
    engine, _, stream = await _engine()
    setup(engine, stream)
    units = [Unit("a"), Unit("b")]
    engine.submit(units)
    ack(engine, stream.of("append_block")[0], offset=0)
    assert engine.release() == units[1:]
    assert state(engine) is FlowState.CLOSED and stream.flows == {} and engine.dead is None


async def test_learning_a_seal_settles_what_it_holds_and_sends_nothing_more() -> None:
    engine, policy, stream = await _engine()
    setup(engine, stream)
    engine.submit([Unit("a"), Unit("b")])
    engine.learn_sealed()
    assert state(engine) is FlowState.SETTING_UP and engine.sealing
    setup(engine, stream, last_event_number=0)
    assert state(engine) is FlowState.SEALED and policy.sealed_told == 1
    assert policy.acked == [("a", -1)] and [u.name for u in engine.units] == ["b"]
    assert len(stream.blocks()) == 2  # nothing resent to the sealed segment
    engine.on_stream_lost(FolioUnavailableError("cut"))
    engine.on_stream_ready()
    assert len(stream.of("setup_append")) == 2  # a sealed flow does not set up again


async def test_a_recorded_number_inside_a_unit_renumbers_what_is_queued() -> None:
    engine, policy, stream = await _engine()
    setup(engine, stream)
    engine.submit([Unit("a", 3)])  # numbered 0..2
    engine.on_stream_lost(FolioUnavailableError("cut"))
    engine.on_stream_ready()
    setup(engine, stream, last_event_number=1)  # inside "a": another writer's number
    assert policy.acked == []
    assert stream.blocks()[-1].last_event_number == 4  # renumbered above it: 2..4


async def test_moves_the_table_refuses_raise() -> None:
    engine, _, stream = await _engine()
    setup(engine, stream)
    with pytest.raises(FlowStateError, match="READY to NEW"):
        engine.detach()  # only a flow whose move failed is detached
    assert engine.on_moved(cast(Any, stream), 2) is False  # not moving: the registration is refused
    engine.die(FolioUnavailableError("gone"))
    with pytest.raises(FlowStateError, match="CLOSED to SEALED"):
        engine.enter_sealed()


async def test_a_refusal_the_policy_leaves_is_ignored_unless_retriable() -> None:
    engine, policy, stream = await _engine()
    setup(engine, stream)
    engine.submit([Unit("a")])
    refuse(engine, stream.of("append_block")[0], retriable=False)
    assert state(engine) is FlowState.READY and len(policy.refusals) == 1
    assert engine.last_error is policy.refusals[0]


class _Following(Brokers):
    """A client's brokers that record a flow's move instead of looking the owner up."""

    def __init__(self, stream: Stream) -> None:
        super().__init__(("127.0.0.1:1",), 1)  # channels connect lazily: nothing dials
        self.stream = stream
        self.moves: list[tuple[Any, int, str, float | None]] = []

    def open_flow(self, flow: Any) -> tuple[Any, int]:
        return self.stream.open_flow(flow)

    def follow(self, flow: Any, stream: Any, flow_id: int, error: WrongHostError,
               deadline: float | None) -> None:
        self.moves.append((flow, flow_id, error.owner or "", deadline))


async def test_wrong_host_moves_the_flow_and_the_owners_setup_settles_what_was_in_doubt(
        ) -> None:
    stream = Stream()
    brokers = _Following(stream)
    policy = Plain()
    engine: FlowEngine[Unit] = FlowEngine(SEGMENT, writer_id="w", source=brokers,
                                          policy=policy, log=log)
    try:
        engine.start()
        await settle()
        setup(engine, stream)
        engine.submit([Unit("a"), Unit("b")])
        first, second = stream.of("append_block")
        engine.on_reply(append_pb2.AppendReply(
            request_id=second.request_id,
            wrong_host=append_pb2.WrongHost(segment=SEGMENT, owner="10.0.0.2:7070")))
        assert state(engine) is FlowState.MOVING
        assert brokers.moves == [(engine, 1, "10.0.0.2:7070", None)]
        ack(engine, first, offset=0)  # an answer from the broker it left: ignored
        assert policy.acked == []
        owner = Stream()
        assert engine.on_moved(cast(Any, owner), 7)
        assert state(engine) is FlowState.DISCONNECTED
        engine.on_stream_ready()
        setup(engine, owner, last_event_number=0)  # "a" was stored before the move
        assert policy.acked == [("a", -1)]
        assert [(b.data, b.last_event_number) for b in owner.blocks()] == [(b"b", 1)]
        # In a cluster, a stream lost to a broker moves the flow too (owner unknown).
        brokers.cluster = True
        engine.on_stream_lost(FolioUnavailableError("cut"))
        assert state(engine) is FlowState.MOVING and brokers.moves[-1][2] == ""
    finally:
        await brokers.close()
