"""A broker that is up but silent (SIGSTOPped): the SDK's keepalive leaves it (issue 22).

A stopped process keeps its TCP connections up: the kernel acknowledges what
the client sends, nothing answers. Before keepalive the SDK's streams waited on
such a connection for as long as the broker was stopped. Here the writer is
idle when the broker stops (every block acknowledged), so no progress deadline
is running: only a keepalive PING that is not acknowledged can cut its Append
stream. Once cut, the writer's next events wait (a connection to a stopped
process fails before its HTTP/2 handshake; the stream opens again when its
channel reaches the broker), and when the broker resumes they are written,
once, after the earlier ones.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import grpc
import pytest

import folio
from tests.support.bookies import BookieProcesses
from tests.support.standalone import read_payloads, start_standalone
from tests.support.wait import wait_for

pytestmark = pytest.mark.faults

TOPIC = "silent"
SEGMENT = f"{TOPIC}/0"


def _restarts(client: folio.Client) -> int:
    return sum(connection.stream_restarts for connection in client.pool_stats().connections)


def _reconnected(client: folio.Client) -> bool:
    """Whether every channel with append flows is READY with its Append stream open."""
    writing = [c for c in client.pool_stats().connections if c.append_flows]
    return bool(writing) and all(c.state == "ready" and c.stream_connected for c in writing)


def test_keepalive_cuts_an_idle_stream_to_a_stopped_broker_and_writes_resume_once(
        tmp_path: Path, bookie_processes: BookieProcesses) -> None:
    server = start_standalone(bookie_processes, tmp_path / "standalone")
    first = [b"a%d" % n for n in range(10)]
    then = [b"b%d" % n for n in range(10)]
    with folio.Client(server.address, timeout_s=60) as client:
        client.create_topic(TOPIC)
        with client.writer(TOPIC, linger_ms=1) as writer:
            for future in [writer.write_event(p, routing_key="k") for p in first]:
                future.result(60)
            before = _restarts(client)
            assert before == 0
            os.kill(server.pid, signal.SIGSTOP)
            try:
                wait_for(lambda: _restarts(client) > before,
                         "the idle append stream to the stopped broker cut by keepalive",
                         timeout_s=60)
                pending = [writer.write_event(p, routing_key="k") for p in then]
            finally:
                os.kill(server.pid, signal.SIGCONT)
            results = [future.result(60) for future in pending]
        assert [r.segment for r in results] == [SEGMENT] * len(then)
        end = client.get_segments(TOPIC)[0].end_offset
    assert end == len(first) + len(then)
    with grpc.insecure_channel(server.address) as channel:
        assert read_payloads(channel, SEGMENT, until_offset=end) == first + then


def test_a_delivery_timeout_that_passes_is_the_typed_unknown_outcome_error(
        tmp_path: Path, bookie_processes: BookieProcesses) -> None:
    server = start_standalone(bookie_processes, tmp_path / "standalone")
    with folio.Client(server.address, timeout_s=60) as client:
        client.create_topic(TOPIC)
        with client.writer(TOPIC, linger_ms=1, delivery_timeout_ms=4_000) as writer:
            writer.write_event(b"first", routing_key="k").result(60)
            os.kill(server.pid, signal.SIGSTOP)
            try:
                future = writer.write_event(b"maybe", routing_key="k")
                error = future.exception(60)
            finally:
                os.kill(server.pid, signal.SIGCONT)
            assert isinstance(error, folio.DeliveryTimeoutError)
            # Unknown, not failed: the broker may have stored it (it had the bytes).
            assert not error.retriable
            assert error.segment == SEGMENT
            assert "outcome is unknown" in str(error)
            # Caused by the last error retried, if any. Keepalive leaves the
            # stopped broker about 2 s (at most 3 s) after the block went out,
            # and the flow then retries until the block's deadline (4 s):
            # usually the cause is that cut or a failed reconnection. Under a
            # stall of the IO thread the deadline may come first, with nothing
            # retried: then there is no cause (both are the SDK's contract; the
            # cause itself is tested deterministically in
            # tests/unit/folio/write/test_segment_writer.py).
            if error.__cause__ is None:
                assert error.last_error is None and "last error" not in str(error)
            else:
                assert error.last_error == type(error.__cause__).__name__
            with pytest.raises(folio.DeliveryTimeoutError) as flushed:
                writer.flush()  # the first failure since the last flush
            assert flushed.value is error
            writer.flush()  # reported once: neither this flush nor close raises it again
            # The writer's stream opens again by itself as soon as its channel
            # reaches the resumed broker (no admin call to wake it: the stream
            # waits for the channel, not for its backoff, which grew while the
            # broker was stopped; tests/faults/test_append_reconnect.py). The
            # next write then goes on that stream within its delivery timeout.
            wait_for(lambda: _reconnected(client),
                     "the writer's stream open again to the resumed broker", timeout_s=60)
            writer.write_event(b"after", routing_key="k").result(60)
        end = client.get_segments(TOPIC)[0].end_offset
    with grpc.insecure_channel(server.address) as channel:
        stored = read_payloads(channel, SEGMENT, until_offset=end)
    # Stored once or not at all, never twice; the writer's later event after it.
    assert stored in ([b"first", b"maybe", b"after"], [b"first", b"after"])
