"""The read-stream engine (folio._transport.segment_streams) over a scripted Read stub.

- A read step the broker splits into several responses: as read.proto says
  (each response's ``next_offset`` claims no offset a later one serves) and as
  brokers before that rule did it (each gets the step's ``next_offset``); in
  both, events of the later responses are still returned, and a stream broken
  after the first one reopens at the end of what it got.
- A response without blocks moves the position past left-out entries.
- A payload the serializer cannot decode: raised (and raised again) until
  skipped, or skipped, or returned raw; nothing around it is lost; events
  buffered at ``close`` are still returned.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from folio._transport.io_thread import IoThread
from folio._transport.segment_streams import SegmentStreams
from folio.api.v1 import read_pb2
from folio.api.v1.block import encode_block
from folio.errors import DeserializationError, InvalidArgumentError, InvalidBlockError
from folio.models import DeserializationPolicy
from folio.serializers import JsonSerializer
from tests.unit.folio.transport.read_script import Stub, json_response, read_stub, response

WAIT_S = 30.0


@pytest.fixture
def io() -> Iterator[IoThread]:
    thread = IoThread("test-io")
    yield thread
    thread.close()


def _read(streams: SegmentStreams[Any], count: int) -> list[int]:
    """Offsets of the next ``count`` events (fewer if they do not come within WAIT_S)."""
    deadline = time.monotonic() + WAIT_S
    offsets: list[int] = []
    while len(offsets) < count and (left := deadline - time.monotonic()) > 0:
        event = streams.next_event(left)  # None now and then: a skip or an end
        if event is not None:
            offsets.append(event.offset)
    return offsets


def test_a_step_split_in_responses_returns_every_event(io: IoThread) -> None:
    stub = Stub(([response(0, 2, 6), response(2, 2, 6), response(4, 2, 6)], False))
    streams: SegmentStreams[Any] = SegmentStreams(io=io, stub=read_stub(stub), deserialize=None)
    streams.add("t/0", 0)
    try:
        assert _read(streams, 6) == [0, 1, 2, 3, 4, 5]
        assert streams.positions() == {"t/0": 6}
    finally:
        streams.close()


def test_a_stream_broken_inside_a_step_reopens_after_what_it_got(io: IoThread) -> None:
    stub = Stub(([response(0, 2, 6)], True), ([response(2, 4, 6)], False))
    streams: SegmentStreams[Any] = SegmentStreams(io=io, stub=read_stub(stub), deserialize=None)
    streams.add("t/0", 0)
    try:
        assert _read(streams, 6) == [0, 1, 2, 3, 4, 5]
        assert stub.offsets[:2] == [0, 2]
    finally:
        streams.close()


def test_a_response_without_blocks_moves_past_left_out_entries(io: IoThread) -> None:
    stub = Stub(([response(0, 2, 2), read_pb2.ReadResponse(next_offset=5)], False))
    streams: SegmentStreams[Any] = SegmentStreams(io=io, stub=read_stub(stub), deserialize=None)
    streams.add("t/0", 0)
    try:
        assert _read(streams, 2) == [0, 1]
        assert streams.next_event(WAIT_S) is None  # woken: the caller may wait for offset 5
        assert streams.position("t/0") == 5
    finally:
        streams.close()


def test_a_split_step_as_read_proto_says_then_a_left_out_tail(io: IoThread) -> None:
    # The broker's split: earlier responses claim up to their last block, the
    # last one the step's next_offset (left-out entries 6..8 after its blocks).
    stub = Stub(([response(0, 2, 2), response(2, 2, 4), response(4, 2, 9),
                   read_pb2.ReadResponse(next_offset=9)], False))
    streams: SegmentStreams[Any] = SegmentStreams(io=io, stub=read_stub(stub), deserialize=None)
    streams.add("t/0", 0)
    try:
        assert _read(streams, 6) == [0, 1, 2, 3, 4, 5]
        assert streams.next_event(WAIT_S) is None  # woken by the blockless response
        assert streams.position("t/0") == 9
    finally:
        streams.close()


# -- payloads the serializer cannot decode ------------------------------------

def _scenario() -> Stub:
    """Offsets 0-2 good, 3 bad, 4-5 good in one response; 6-7 good in the next."""
    return Stub(([json_response(0, [b"0", b"1", b"2", b"x", b"4", b"5"]),
                   json_response(6, [b"6", b"7"])], False))


def test_an_undecodable_event_raises_and_stays_until_skipped(io: IoThread) -> None:
    streams: SegmentStreams[Any] = SegmentStreams(io=io, stub=read_stub(_scenario()),
                                                  deserialize=JsonSerializer().deserialize)
    streams.add("t/0", 0)
    try:
        assert _read(streams, 3) == [0, 1, 2]
        for _ in range(3):  # raises again and again, the position on the event
            assert streams.next_buffered() is None
            with pytest.raises(DeserializationError) as raised:
                streams.next_event(WAIT_S)
            assert (raised.value.segment, raised.value.offset) == ("t/0", 3)
            assert streams.positions() == {"t/0": 3}
        streams.skip(raised.value)
        with pytest.raises(InvalidArgumentError):
            streams.skip(raised.value)
        assert streams.positions() == {"t/0": 4}
        assert _read(streams, 4) == [4, 5, 6, 7]  # the buffered events after it were kept
    finally:
        streams.close()


@pytest.mark.parametrize("policy", ["skip", "raw"])
def test_the_skip_and_raw_policies(io: IoThread, policy: DeserializationPolicy) -> None:
    streams: SegmentStreams[Any] = SegmentStreams(
        io=io, stub=read_stub(_scenario()), deserialize=JsonSerializer().deserialize,
        on_deserialization_error=policy)
    streams.add("t/0", 0)
    try:
        expected = [0, 1, 2, 4, 5, 6, 7] if policy == "skip" else list(range(8))
        assert _read(streams, len(expected)) == expected
    finally:
        streams.close()


def test_buffered_events_are_returned_after_close_the_bad_one_included(io: IoThread) -> None:
    streams: SegmentStreams[Any] = SegmentStreams(io=io, stub=read_stub(_scenario()),
                                                  deserialize=JsonSerializer().deserialize)
    streams.add("t/0", 0)
    assert _read(streams, 1) == [0]
    streams.close()
    assert [e.offset for e in (streams.next_event(0), streams.next_event(0))
            if e is not None] == [1, 2]
    with pytest.raises(DeserializationError):
        streams.next_event(0)
    assert streams.positions() == {"t/0": 3}
    streams.skip(DeserializationError("", topic="t", segment="t/0", offset=3, payload=b"x",
                                      cause=ValueError()))
    assert [e.offset for e in (streams.next_event(0), streams.next_event(0))
            if e is not None] == [4, 5]
    assert streams.next_event(0) is None
    assert streams.positions() == {"t/0": 6}


def test_an_invalid_block_stops_its_segment_before_theresponse(io: IoThread) -> None:
    """The stream read on past the response: its segment stops at the offset before it."""
    broken = read_pb2.ReadResponse(blocks=[
        read_pb2.ReadBlock(offset=2, event_count=1, data=encode_block([b"2"])),
        read_pb2.ReadBlock(offset=3, event_count=5, data=encode_block([b"3", b"4"]))],
        next_offset=8)
    stub = Stub(([response(0, 2, 2), broken, response(8, 2, 10)], False))
    streams: SegmentStreams[Any] = SegmentStreams(io=io, stub=read_stub(stub), deserialize=None)
    streams.add("t/0", 0)
    try:
        assert _read(streams, 2) == [0, 1]
        with pytest.raises(InvalidBlockError, match="segment t/0 offset 3"):
            streams.next_event(WAIT_S)
        assert streams.dropped == ("t/0", 2)
        assert streams.segments == []
    finally:
        streams.close()
