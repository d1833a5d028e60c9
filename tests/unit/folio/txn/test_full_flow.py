"""A full transaction's segment flow (folio.txn._full_flow): refusals, retriable or not.

The Append stream is the recording stand-in of ``test_segment_writer``; the
test plays the broker. A retriable refusal (the ledger service unavailable a
moment) sets the flow up again and resends the block under its number, so
the batch still lands once; a refusal for good fails the batch.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from folio._transport.io_thread import IoThread
from folio.api.v1 import append_pb2
from folio.errors import FolioError
from folio.txn._full_flow import SegmentFlow
from tests.unit.folio.write.test_segment_writer import RecordingStream

SEGMENT = "t/0"


@pytest.fixture
def io() -> Iterator[IoThread]:
    thread = IoThread("test-full-flow")
    yield thread
    thread.close()


def _on_io(io: IoThread, fn: Any, *args: Any) -> None:
    async def call() -> None:
        fn(*args)
    io.run(call(), timeout=5)
    for _ in range(3):
        io.run(asyncio.sleep(0), timeout=5)


def _reply(io: IoThread, flow: SegmentFlow, command: append_pb2.AppendCommand,
           **reply: Any) -> None:
    _on_io(io, flow.on_reply, append_pb2.AppendReply(request_id=command.request_id, **reply))


def _failed(retriable: bool) -> append_pb2.AppendFailed:
    return append_pb2.AppendFailed(code=grpc.StatusCode.UNAVAILABLE.value[0],
                                   message="bookies down", error="BookieUnavailableError",
                                   retriable=retriable)


def _started(io: IoThread) -> tuple[RecordingStream, SegmentFlow,
                                    concurrent.futures.Future[None]]:
    stream = RecordingStream()
    flow = SegmentFlow(SEGMENT, writer_id="w", txn_id=b"t" * 16,
                       source=stream, give_up_s=60)
    future: concurrent.futures.Future[None] = concurrent.futures.Future()
    _on_io(io, flow.submit, [(b"block", 3)], future)
    stream.wait_for("setup_append", 1)
    setup = [c for c in stream.sent if c.HasField("setup_append")][-1]
    _reply(io, flow, setup, append_setup=append_pb2.AppendSetup(segment=SEGMENT,
                                                                 last_event_number=-1))
    stream.wait_for("append_block", 1)
    return stream, flow, future


def test_a_retriable_refusal_sets_up_again_and_resends_the_block_once(io: IoThread) -> None:
    stream, flow, future = _started(io)
    block = [c for c in stream.sent if c.HasField("append_block")][-1]
    _reply(io, flow, block, append_failed=_failed(retriable=True))
    assert not future.done()
    stream.wait_for("setup_append", 2)  # after the backoff
    setup = [c for c in stream.sent if c.HasField("setup_append")][-1]
    _reply(io, flow, setup, append_setup=append_pb2.AppendSetup(segment=SEGMENT,
                                                                 last_event_number=-1))
    stream.wait_for("append_block", 2)
    resent = [c for c in stream.sent if c.HasField("append_block")][-1]
    assert resent.append_block.last_event_number == block.append_block.last_event_number == 2
    _reply(io, flow, resent, data_appended=append_pb2.DataAppended(event_number=2, offset=0,
                                                                   event_count=3))
    assert future.result(timeout=5) is None


def test_a_refusal_for_good_fails_the_batch(io: IoThread) -> None:
    stream, flow, future = _started(io)
    block = [c for c in stream.sent if c.HasField("append_block")][-1]
    _reply(io, flow, block, append_failed=_failed(retriable=False))
    error = future.exception(timeout=5)
    assert isinstance(error, FolioError) and not error.retriable
    assert sum(c.HasField("setup_append") for c in stream.sent) == 1
