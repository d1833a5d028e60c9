"""``EventReader.read_many`` and ``AsyncEventReader.read_many`` over a scripted Read stub.

What as many ``read_next`` calls would return, in one list: the same events
in the same order, at most ``max_events``, the first waited for and the rest
only if already there; ``positions`` after the last one returned; a failure
met once the list holds events raised by the next call (an invalid block
names its offset and none of its response's events are returned; an
undecodable payload keeps the reader on it until skipped).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest

from folio._transport.io_thread import IoThread
from folio._transport.loop_io import LoopIo, as_io_thread
from folio.aio import AsyncEventReader
from folio.api.v1 import read_pb2
from folio.api.v1.block import encode_block
from folio.errors import DeserializationError, InvalidArgumentError, InvalidBlockError
from folio.models import DeserializationPolicy, Event, UndecodedEvent
from folio.read.reader import EventReader
from folio.serializers import BytesSerializer, JsonSerializer, Serializer
from tests.unit.folio.transport.read_script import Stub, json_response, read_stub, response

WAIT_S = 30.0


@pytest.fixture
def io() -> Iterator[IoThread]:
    thread = IoThread("test-io")
    yield thread
    thread.close()


def _reader(io: IoThread, stub: Stub, serializer: Serializer[Any] | None = None,
            policy: DeserializationPolicy = "raise") -> EventReader[Any]:
    return EventReader("t", {"t/0": 0}, serializer or BytesSerializer(), io=io,
                       stub=read_stub(stub), on_deserialization_error=policy)


def _offsets(events: list[Event[Any]]) -> list[int]:
    return [event.offset for event in events]


def _read_many_until(reader: EventReader[Any], count: int, max_events: int
                     ) -> list[list[Event[Any]]]:
    """Lists of ``read_many(max_events)`` until ``count`` events came (within WAIT_S)."""
    deadline = time.monotonic() + WAIT_S
    lists: list[list[Event[Any]]] = []
    while sum(map(len, lists)) < count and (left := deadline - time.monotonic()) > 0:
        events = reader.read_many(max_events, timeout=left)
        assert len(events) <= max_events
        if events:
            lists.append(events)
    return lists


def test_one_response_is_handed_over_in_order_within_the_bound(io: IoThread) -> None:
    with _reader(io, Stub(([response(0, 10, 10)], False))) as reader:
        first = reader.read_many(4, timeout=WAIT_S)
        assert _offsets(first) == [0, 1, 2, 3]
        assert [event.payload for event in first] == [b"e0", b"e1", b"e2", b"e3"]
        assert reader.positions == {"t/0": 4}
        assert _offsets(reader.read_many(100, timeout=WAIT_S)) == [4, 5, 6, 7, 8, 9]
        assert reader.positions == {"t/0": 10}
        assert reader.read_many(100, timeout=0.05) == []  # nothing more: the timeout


def test_lists_across_responses_are_read_nexts_events(io: IoThread) -> None:
    stub = Stub(([response(0, 4, 4), response(4, 3, 7), response(7, 5, 12)], False))
    with _reader(io, stub) as reader:
        lists = _read_many_until(reader, 12, max_events=5)
        assert _offsets([event for events in lists for event in events]) == list(range(12))
        assert reader.positions == {"t/0": 12}


def test_read_next_and_read_many_take_turns(io: IoThread) -> None:
    with _reader(io, Stub(([response(0, 6, 6)], False))) as reader:
        assert (event := reader.read_next(WAIT_S)) is not None and event.offset == 0
        assert _offsets(reader.read_many(2, timeout=WAIT_S)) == [1, 2]
        assert (event := reader.read_next(WAIT_S)) is not None and event.offset == 3
        assert _offsets(reader.read_many(9, timeout=WAIT_S)) == [4, 5]


@pytest.mark.parametrize("bad", [0, -1, True, 2.5, "3", None])
def test_max_events_must_be_a_positive_int(io: IoThread, bad: Any) -> None:
    with _reader(io, Stub()) as reader, pytest.raises(InvalidArgumentError, match="max_events"):
        reader.read_many(bad, timeout=0)


def test_an_invalid_block_ends_the_list_and_raises_next_naming_its_offset(io: IoThread) -> None:
    """Whether the bad response came before the first call returned or after, the events
    before it come in one list, and the next call raises: none of its events returned."""
    broken = read_pb2.ReadResponse(blocks=[
        read_pb2.ReadBlock(offset=2, event_count=1, data=encode_block([b"2"])),
        read_pb2.ReadBlock(offset=3, event_count=5, data=encode_block([b"3", b"4"]))],
        next_offset=8)
    stub = Stub(([response(0, 2, 2), broken, response(8, 2, 10)], False))
    with _reader(io, stub) as reader:
        assert _offsets(reader.read_many(100, timeout=WAIT_S)) == [0, 1]
        with pytest.raises(InvalidBlockError, match="segment t/0 offset 3") as raised:
            reader.read_many(100, timeout=WAIT_S)
        assert (raised.value.segment, raised.value.offset) == ("t/0", 3)
        assert reader.positions == {"t/0": 2}  # stopped before the response: nothing skipped
        assert reader.read_many(100, timeout=0.05) == []


def _undecodable() -> Stub:
    """Offsets 0-2 good, 3 not JSON, 4-5 good in one response; 6-7 in the next."""
    return Stub(([json_response(0, [b"0", b"1", b"2", b"x", b"4", b"5"]),
                  json_response(6, [b"6", b"7"])], False))


def test_an_undecodable_payload_ends_the_list_and_stays_until_skipped(io: IoThread) -> None:
    with _reader(io, _undecodable(), JsonSerializer()) as reader:
        assert [event.payload for event in reader.read_many(100, timeout=WAIT_S)] == [0, 1, 2]
        for _ in range(2):  # raised again and again, the reader on the event
            with pytest.raises(DeserializationError) as raised:
                reader.read_many(100, timeout=WAIT_S)
            assert raised.value.offset == 3 and reader.positions == {"t/0": 3}
        reader.skip(raised.value)
        lists = _read_many_until(reader, 4, max_events=100)
        assert [event.payload for events in lists for event in events] == [4, 5, 6, 7]


@pytest.mark.parametrize("policy", ["skip", "raw"])
def test_the_skip_and_raw_policies_in_a_list(io: IoThread, policy: DeserializationPolicy
                                             ) -> None:
    expected = [0, 1, 2, 4, 5, 6, 7] if policy == "skip" else list(range(8))
    with _reader(io, _undecodable(), JsonSerializer(), policy) as reader:
        events = [e for events in _read_many_until(reader, len(expected), 100) for e in events]
    assert _offsets(events) == expected
    assert [isinstance(event, UndecodedEvent) for event in events] == [
        offset == 3 for offset in expected]


def test_after_close_the_unpacked_events_then_nothing(io: IoThread) -> None:
    reader = _reader(io, Stub(([response(0, 5, 5)], False)))
    assert _offsets(reader.read_many(1, timeout=WAIT_S)) == [0]
    reader.close()
    assert _offsets(reader.read_many(100, timeout=WAIT_S)) == [1, 2, 3, 4]
    assert reader.read_many(100, timeout=None) == []  # closed: no wait


# -- the asyncio face -----------------------------------------------------------


def _async_reader(stub: Stub) -> AsyncEventReader[bytes]:
    core: EventReader[bytes] = EventReader("t", {"t/0": 0}, BytesSerializer(),
                                           io=as_io_thread(LoopIo()), stub=read_stub(stub))
    return AsyncEventReader(core)


async def test_async_read_many_in_order_within_the_bound() -> None:
    reader = _async_reader(Stub(([response(0, 4, 4), response(4, 4, 8)], False)))
    async with reader, asyncio.timeout(WAIT_S):
        got: list[int] = []
        while len(got) < 8:
            events = await reader.read_many(3)
            assert 1 <= len(events) <= 3
            got += _offsets(events)
        assert got == list(range(8)) and reader.positions == {"t/0": 8}
        with pytest.raises(InvalidArgumentError):
            await reader.read_many(0)


async def test_a_cancelled_async_read_many_loses_nothing() -> None:
    reader = _async_reader(Stub(([], False), ([response(0, 3, 3)], False)))
    async with reader:
        got: list[int] = []
        async with asyncio.timeout(WAIT_S):
            while len(got) < 3:
                try:
                    async with asyncio.timeout(0.01):  # cancelled at times while waiting
                        got += _offsets(await reader.read_many(2))
                except TimeoutError:
                    pass
        assert got == [0, 1, 2]
    assert await reader.read_many() == []  # closed
