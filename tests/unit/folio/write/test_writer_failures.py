"""How a writer reports a failed block: once per channel, and never over the caller's error.

A block's failure reaches the application on two channels: each of its
events' futures (always), and the writer's ``flush``/``close`` (the first
failure since the last flush, once). A block that expired (outcome unknown)
is out of the flow for good: whatever the broker answers late about it, it
is neither reported again nor resent. And leaving a ``with`` block that
raised closes the writer without putting a failure it reports in place of
the body's own exception.

The broker is played by the test (``RecordingStream``, as in
``test_segment_writer.py``). The real-process case is
``tests/faults/test_silent_broker.py``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import grpc
import pytest

from folio._transport.io_thread import IoThread
from folio.api.v1 import append_pb2
from folio.errors import DeliveryTimeoutError, FolioUnavailableError
from folio.models import SegmentRange, TopicConfig, TopicInfo
from folio.serializers import BytesSerializer
from folio.write.writer import EventWriter
from tests.unit.folio.write.test_segment_writer import SEGMENT, Harness, RecordingStream


@pytest.fixture
def io() -> Iterator[IoThread]:
    thread = IoThread("test-failures-io")
    yield thread
    thread.close()


def _expire(h: Harness) -> None:
    """A tick past every block's delivery deadline (60 s in these tests)."""
    h.on_io(h.writer.on_tick, time.monotonic() + 61)


def _refused(retriable: bool) -> append_pb2.AppendFailed:
    return append_pb2.AppendFailed(code=grpc.StatusCode.UNAVAILABLE.value[0],
                                   message="bookies down", error="BookieUnavailableError",
                                   retriable=retriable)


@pytest.mark.parametrize("late", ["acknowledged", "refused-retriable", "refused-for-good"])
def test_an_expired_block_is_reported_once_and_never_resent_whatever_comes_late(
        io: IoThread, late: str) -> None:
    h = Harness(io)
    future = h.append(b"maybe")
    h.cut()
    h.setup()
    (sent,) = h.commands("append_block")
    _expire(h)  # the broker was silent: the stream is up, nothing was retried
    error = future.exception(timeout=1)
    assert isinstance(error, DeliveryTimeoutError) and h.errors == [error]

    # The broker's answer to the expired block comes late.
    if late == "acknowledged":
        h.ack(sent, offset=5)
    else:
        h.reply(sent, append_failed=_refused(retriable=late == "refused-retriable"))
    # Then the stream breaks and the flow sets up again, the broker not
    # holding the block: still nothing is resent (its outcome was given).
    h.on_io(h.writer.on_stream_lost, FolioUnavailableError("cut"))
    h.on_io(h.writer.on_stream_ready)
    h.setup(last_event_number=-1)
    assert h.commands("append_block") == [sent]
    assert future.exception(timeout=0) is error and h.errors == [error]

    # The next block never takes the expired one's number (that one may be
    # stored: the broker would answer a reuse as a duplicate).
    later = h.append(b"later")
    h.cut()
    after = h.commands("append_block")[-1]
    assert after.append_block.last_event_number == sent.append_block.last_event_number + 1
    h.ack(after, offset=6)
    assert later.result(timeout=1).offset == 6
    assert h.errors == [error]


def test_an_expiry_with_nothing_retried_has_no_cause_and_hides_no_context(
        io: IoThread) -> None:
    h = Harness(io)
    future = h.append(b"maybe")
    h.cut()
    h.setup()
    _expire(h)  # sent on a stream that stayed up; the broker answered nothing
    error = future.exception(timeout=1)
    assert isinstance(error, DeliveryTimeoutError)
    assert error.last_error is None and "last error" not in str(error)
    # No cause, and no suppressed context: raised while another exception is
    # handled (close() leaving a `with` whose body failed), that one still shows.
    assert error.__cause__ is None and not error.__suppress_context__


def _topic() -> TopicInfo:
    config = TopicConfig(retention_ms=-1, retention_bytes=-1, max_event_bytes=1 << 20,
                         ledger_rollover_bytes=1 << 30, ledger_rollover_ms=3_600_000)
    return TopicInfo(name="t", config=config, created_ms=1, segments=(SegmentRange(
        name=SEGMENT, number=0, key_low=0.0, key_high=1.0, sealed=False, start_offset=0,
        end_offset=0),))


class _Writer:
    """An ``EventWriter`` whose broker is unreachable (its blocks wait until they expire)."""

    def __init__(self, io: IoThread) -> None:
        self.io = io
        self.stream = RecordingStream()
        self.stream.connected = False
        self.writer: EventWriter[bytes] = EventWriter(
            _topic(), BytesSerializer(), io=io, stream=self.stream, linger_ms=60_000,
            batch_size_bytes=1 << 20, max_in_flight=5, delivery_timeout_ms=60_000,
            writer_id="w")

    def write_and_expire(self) -> BaseException:
        """Writes one event, lets its block expire; the future's error."""
        future = self.writer.write_event(b"maybe", routing_key="k")
        assert self.writer._segments[SEGMENT].cut_now(time.monotonic() + 5)

        async def tick() -> None:
            await asyncio.sleep(0)  # after the block's _enqueue (call_soon order)
            self.writer._segments[SEGMENT].on_tick(time.monotonic() + 61)

        self.io.run(tick(), timeout=5)
        error = future.exception(timeout=5)
        assert isinstance(error, DeliveryTimeoutError)
        return error


def test_flush_reports_a_failure_once_and_close_does_not_again(io: IoThread) -> None:
    w = _Writer(io)
    error = w.write_and_expire()
    with pytest.raises(DeliveryTimeoutError) as flushed:
        w.writer.flush(timeout=5)
    assert flushed.value is error  # the first failure since the last flush
    w.writer.flush(timeout=5)  # reported: not again
    w.writer.close(timeout=5)  # nor by close
    assert w.writer.closed


def test_close_reports_a_failure_no_flush_reported(io: IoThread) -> None:
    w = _Writer(io)
    error = w.write_and_expire()
    with pytest.raises(DeliveryTimeoutError) as closed, w.writer:
        pass
    assert closed.value is error and w.writer.closed


class _BodyFailed(Exception):
    pass


def test_a_with_body_that_raises_keeps_its_error_and_close_notes_the_writer_failure(
        io: IoThread) -> None:
    # What made tests/faults/test_silent_broker.py fail "with a second
    # DeliveryTimeoutError from close()": an assertion in the body failed
    # after a block's future had reported its DeliveryTimeoutError, and
    # leaving the `with` raised that same error from close() in its place
    # (shown without it: a DeliveryTimeoutError without a cause hid its
    # context). The body's error is the one to see; the failure close()
    # reports is noted on it.
    w = _Writer(io)
    with pytest.raises(_BodyFailed) as raised, w.writer:
        error = w.write_and_expire()
        raise _BodyFailed("the body's own check failed")
    assert w.writer.closed
    notes: list[str] = getattr(raised.value, "__notes__", [])
    assert len(notes) == 1 and "DeliveryTimeoutError" in notes[0] and str(error) in notes[0]

