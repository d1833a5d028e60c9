"""A segment's Read stream holds at most its window of responses, across moves and reconnects.

A real ``folio standalone`` behind a real TCP proxy, reached through a
``Redirector`` (a pretend cluster broker), so a cut connection moves the
stream: it looks its segment's owner up and opens a new Read call. The credit
a stream's queued responses hold must carry over to the new call: were it
given back into a fresh window, the new call could queue a whole window more
(and so on at every move), with no bound on the responses held.
"""

from __future__ import annotations

from typing import Any

import pytest

import folio
from folio._transport.read_stream_state import ReadStreamState
from folio._transport.segment_streams import SegmentStreams
from tests.support.bookies import BookieProcess
from tests.support.proxy import TcpProxy
from tests.support.redirector import Redirector
from tests.support.wait import wait_for

pytestmark = pytest.mark.faults

WAIT_S = 60.0
WINDOW = 4  # segment_streams._BUFFERED_RESPONSES
EVENTS = 40
CUTS = 4


def _take(streams: SegmentStreams[Any], count: int) -> list[int]:
    offsets = []
    for _ in range(count):
        event = streams.next_event(WAIT_S)
        assert event is not None, "no event within the wait"
        offsets.append(event.offset)
    return offsets


def _take_until_moved(streams: SegmentStreams[Any], calls: int, taken: int) -> list[int]:
    """Takes events one at a time until the stream opens its next Read call.

    Responses gRPC received before the cut still come first, so the stream
    meets the cut only after the caller has taken enough of them to give it
    credit to read on (one, or several). Each take frees one credit.
    """
    offsets: list[int] = []
    while streams.read_calls == calls:
        if taken + len(offsets) == EVENTS:  # every event received: only the move is left
            wait_for(lambda: streams.read_calls > calls, "the stream moving after the cut", WAIT_S)
            break
        offsets += _take(streams, 1)
    return offsets


def test_the_window_holds_across_moves(server: BookieProcess) -> None:
    with TcpProxy(server.host, server.port) as proxy, \
            Redirector(proxy.address) as redirector, \
            folio.Client(redirector.address, timeout_s=30) as client:
        client.create_topic("read-window", 1)
        with client.writer("read-window", linger_ms=0) as writer:
            for n in range(EVENTS):  # one block each: one response each (max_bytes=1)
                writer.write_event(f"e{n}".encode()).result(WAIT_S)
        io = client._io
        streams: SegmentStreams[Any] = SegmentStreams(
            io=io, channels=client._flow_pool(), deserialize=None, max_bytes=1)
        segment = "read-window/0"

        def state() -> ReadStreamState:
            return streams._streams[segment]

        async def credit_and_queued() -> tuple[int, int]:
            # On the IO thread, after every give-back queued before it.
            credit = state().credit
            assert credit is not None
            return credit.free, state().queued

        try:
            streams.add(segment, 0)
            offsets: list[int] = []
            for _ in range(CUTS):
                wait_for(lambda: state().queued >= min(WINDOW, EVENTS - len(offsets)),  # noqa: B023
                         "a full window", WAIT_S)
                calls = streams.read_calls
                assert proxy.cut() >= 1
                offsets += _take_until_moved(streams, calls, len(offsets))
                # The new call fills what the window has free, and no more.
                wait_for(lambda: state().queued >= min(WINDOW, EVENTS - len(offsets)),  # noqa: B023
                         "the moved stream filling its window", WAIT_S)
                free, queued = io.run(credit_and_queued(), WAIT_S)
                assert free + queued == WINDOW, (free, queued)
                offsets += _take(streams, min(WINDOW, EVENTS - len(offsets)))
                free, queued = io.run(credit_and_queued(), WAIT_S)
                assert free + queued == WINDOW, (free, queued)
            offsets += _take(streams, EVENTS - len(offsets))
            assert offsets == list(range(EVENTS))  # nothing lost or repeated
            assert streams.peak_queued <= WINDOW
        finally:
            streams.close()
