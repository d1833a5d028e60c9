"""The three policies on the flow engine: pipelined blocks, one transaction at a time, a
full transaction's blocks (folio.write._segment_flow, folio.txn._txn_flow,
folio.txn._full_flow).

Each runs on the test's event loop, with no IO thread and no writer around
it: the policy and its engine alone, the test playing the broker.
"""

from __future__ import annotations

import concurrent.futures
import time
from typing import Any

from folio._transport.flow_state import FlowState
from folio.api.v1 import append_pb2
from folio.api.v1.block import encode_block
from folio.errors import DeliveryTimeoutError, FolioUnavailableError, SegmentSealedError
from folio.txn._full_flow import SegmentFlow as FullFlow
from folio.txn._txn_commit import TxnCommit
from folio.txn._txn_flow import TxnFlow
from folio.write._segment_flow import Block, SegmentFlow
from folio.write._write_future import BlockOutcome
from tests.unit.folio.flow.stand_ins import SEGMENT, Stream, ack, settle, setup, state

# -- pipelined blocks (an event writer) -------------------------------------------


class Settled:
    """The caller side of a pipelined flow: what ``complete`` was told."""

    def __init__(self) -> None:
        self.offsets: dict[bytes, int] = {}
        self.errors: dict[bytes, BaseException] = {}
        self.sealed = 0

    def complete(self, block: Block, *, offset: int = -1,
                 error: BaseException | None = None) -> None:
        block.done = True
        if error is None:
            self.offsets[block.data] = offset
        else:
            self.errors[block.data] = error

    def on_sealed(self) -> None:
        self.sealed += 1


def _block(name: bytes, deadline_s: float = 60.0) -> Block:
    return Block(name, 1, BlockOutcome(SEGMENT), time.monotonic() + deadline_s)


async def _pipelined() -> tuple[SegmentFlow, Settled, Stream]:
    settled, stream = Settled(), Stream()
    flow = SegmentFlow(SEGMENT, writer_id="w", source=stream, delivery_timeout_s=60.0,
                       complete=settled.complete, on_sealed=settled.on_sealed)
    return flow, settled, stream


async def test_pipelined_blocks_go_out_at_once_each_its_own_entry() -> None:
    flow, settled, stream = await _pipelined()
    assert flow.submit(_block(b"a"), closing=False) is None
    await settle()
    setup(flow.engine, stream)
    for name in (b"b", b"c", b"d"):
        flow.submit(_block(name), closing=False)
    blocks = stream.blocks()
    assert [(b.data, b.last_event_number, b.end) for b in blocks] == [
        (b"a", 0, True), (b"b", 1, True), (b"c", 2, True), (b"d", 3, True)]
    ack(flow.engine, stream.of("append_block")[1], offset=5)  # answered out of order: fine
    assert settled.offsets == {b"b": 5}


async def test_a_pipelined_block_past_its_deadline_fails_with_an_unknown_outcome() -> None:
    flow, settled, _ = await _pipelined()
    flow.submit(_block(b"late", deadline_s=0.0), closing=False)
    flow.submit(_block(b"fine"), closing=False)
    flow.engine.on_tick(time.monotonic())
    assert isinstance(settled.errors[b"late"], DeliveryTimeoutError)
    assert [b.data for b in flow.engine.units] == [b"fine"]


async def test_a_pipelined_seal_settles_what_was_written_and_tells_the_writer() -> None:
    flow, settled, stream = await _pipelined()
    flow.submit(_block(b"a"), closing=False)
    await settle()
    setup(flow.engine, stream)
    flow.submit(_block(b"b"), closing=False)
    second = stream.of("append_block")[1]
    flow.engine.on_reply(append_pb2.AppendReply(
        request_id=second.request_id,
        segment_is_sealed=append_pb2.SegmentIsSealed(segment=SEGMENT, end_offset=1)))
    assert flow.engine.sealing and len(stream.of("setup_append")) == 2
    setup(flow.engine, stream, last_event_number=0)  # "a" landed before the seal
    assert settled.offsets == {b"a": -1} and settled.sealed == 1
    assert [b.data for b in flow.take_over()] == [b"b"]  # handed over by the writer
    assert state(flow.engine) is FlowState.CLOSED


async def test_a_pipelined_seal_without_a_successor_ends_the_flow() -> None:
    settled, stream = Settled(), Stream()
    flow = SegmentFlow(SEGMENT, writer_id="w", source=stream, delivery_timeout_s=60.0,
                       complete=settled.complete, on_sealed=None)
    flow.submit(_block(b"a"), closing=False)
    await settle()
    setup(flow.engine, stream)
    flow.engine.on_reply(append_pb2.AppendReply(
        request_id=stream.of("append_block")[0].request_id,
        segment_is_sealed=append_pb2.SegmentIsSealed(segment=SEGMENT)))
    assert isinstance(settled.errors[b"a"], SegmentSealedError)
    assert isinstance(flow.submit(_block(b"b"), closing=False), SegmentSealedError)


# -- one transaction at a time per key (single-routing-key transactions) ------------


def _commit(*payloads: bytes) -> TxnCommit:
    blocks = [(encode_block([p], ["k"], [1], None), 1) for p in payloads]
    return TxnCommit(blocks, len(payloads), sum(len(b) for b, _ in blocks))


async def _txn() -> tuple[TxnFlow, Stream, list[TxnCommit]]:
    stream = Stream()
    done: list[TxnCommit] = []
    flow = TxnFlow(SEGMENT, writer_id="w", source=stream, on_done=done.append)
    flow.start()
    await settle()
    setup(flow.engine, stream)
    return flow, stream, done


async def test_one_sequence_at_a_time_and_commits_waiting_meanwhile_join_the_next() -> None:
    flow, stream, done = await _txn()
    first, second, third = _commit(b"a", b"b"), _commit(b"c"), _commit(b"d")
    flow.submit(first)
    flow.submit(second)
    flow.submit(third)
    assert [b.end for b in stream.blocks()] == [True]  # the first transaction alone
    assert stream.blocks()[0].last_event_number == 1
    ack(flow.engine, stream.of("append_block")[-1], offset=10)
    assert first.future.result(0).offset == 10 and done == [first]
    # The two that waited go out together, as one entry, numbered on from 2.
    joined = stream.blocks()[1:]
    assert [b.end for b in joined][-1] and sum(b.event_count for b in joined) == 2
    assert joined[-1].last_event_number == 3
    ack(flow.engine, stream.of("append_block")[-1], offset=12, events=2)
    assert (second.future.result(0).offset, third.future.result(0).offset) == (12, 13)


async def test_a_transaction_of_many_blocks_is_held_until_its_end_block() -> None:
    flow, stream, _ = await _txn()
    big = TxnCommit([(encode_block([b"x" * 700_000], ["k"], [1], None), 1)] * 3, 3, 2_100_000)
    flow.submit(big)
    blocks = stream.blocks()
    assert [b.end for b in blocks] == [False, False, True]
    assert [b.last_event_number for b in blocks] == [0, 1, 2]
    ack(flow.engine, stream.of("append_block")[-1], offset=0, events=3)
    assert big.future.result(0).event_count == 3


async def test_a_transaction_in_doubt_after_a_lost_stream_is_settled_by_the_setup() -> None:
    flow, stream, _ = await _txn()
    commit = _commit(b"a")
    flow.submit(commit)
    flow.engine.on_stream_lost(FolioUnavailableError("cut"))
    flow.engine.on_stream_ready()
    setup(flow.engine, stream, last_event_number=0)
    assert commit.future.result(0).offset == -1
    assert (flow.settled_by_setup, flow.resent) == (1, 0)


# -- the blocks of a full transaction -----------------------------------------------


async def _full() -> tuple[FullFlow, Stream]:
    stream = Stream()
    return FullFlow(SEGMENT, writer_id="w", txn_id=b"t" * 16, source=stream,
                    give_up_s=30.0), stream


async def test_a_full_transactions_blocks_are_pipelined_up_to_its_window() -> None:
    flow, stream = await _full()
    future: concurrent.futures.Future[None] = concurrent.futures.Future()
    flow.submit([(b"%d" % n, 1) for n in range(10)], future)
    await settle()
    assert stream.of("setup_append")[0].setup_append.txn_id == b"t" * 16
    setup(flow.engine, stream)
    assert len(stream.blocks()) == 8  # the window
    ack(flow.engine, stream.of("append_block")[0], offset=0)
    assert len(stream.blocks()) == 9
    for command in stream.of("append_block")[1:]:
        ack(flow.engine, command, offset=0)
    ack(flow.engine, stream.of("append_block")[-1], offset=0)
    assert future.result(0) is None  # its last block acknowledged


async def test_a_full_transactions_flow_gives_up_once_down_for_too_long() -> None:
    flow, stream = await _full()
    future: concurrent.futures.Future[Any] = concurrent.futures.Future()
    flow.submit([(b"a", 1)], future)
    await settle()
    setup(flow.engine, stream)
    flow.engine.on_stream_lost(FolioUnavailableError("cut"))
    flow.engine.on_tick(time.monotonic() + 31)
    assert isinstance(future.exception(0), FolioUnavailableError)
    assert state(flow.engine) is FlowState.CLOSED
