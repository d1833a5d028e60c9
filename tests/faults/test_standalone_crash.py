"""A real ``folio standalone`` killed with SIGKILL keeps every acknowledged event.

Events go through a raw Append stream while the process is killed; after a
restart on the same data dir the segment holds every acknowledged event, in
order, possibly followed by events whose acknowledgement the kill cut off (a
writer resends those, and its writer id makes the resend a duplicate), and
the next append continues right after the recovered end. A SIGTERM instead
stops the server gracefully: it exits 0 and its ledgers are closed.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from folio.api.v1 import admin_pb2, admin_pb2_grpc, append_pb2, append_pb2_grpc
from folio.api.v1.block import encode_block
from tests.support.bookies import BookieProcesses
from tests.support.standalone import append_payloads, read_payloads, start_standalone
from tests.support.trailers import trailers

pytestmark = pytest.mark.faults

BLOCK_EVENTS = 50
ACKED_BEFORE_KILL = 2_000


def _payload(number: int) -> bytes:
    return b"event-%08d" % number


def _commands(stop: threading.Event) -> Iterator[append_pb2.AppendCommand]:
    flow = 1 << 32
    yield append_pb2.AppendCommand(request_id=flow, setup_append=append_pb2.SetupAppend(
        segment="crash/0", writer_id="writer-1"))
    number = 0
    sequence = 1
    while not stop.is_set():
        payloads = [_payload(n) for n in range(number, number + BLOCK_EVENTS)]
        number += BLOCK_EVENTS
        yield append_pb2.AppendCommand(request_id=flow | sequence, append_block=(
            append_pb2.AppendBlock(data=encode_block(payloads), event_count=BLOCK_EVENTS,
                                   last_event_number=number - 1, end=True)))
        sequence += 1


def test_sigkill_keeps_every_acknowledged_event_in_order(
    bookie_processes: BookieProcesses, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    server = start_standalone(bookie_processes, data_dir)
    acked = 0
    with grpc.insecure_channel(server.address) as channel:
        # Small ledgers, so the kill lands after a few rollovers.
        admin_pb2_grpc.AdminStub(channel).CreateTopic(admin_pb2.CreateTopicRequest(
            name="crash", config=admin_pb2.TopicConfig(ledger_rollover_bytes=8 * 1024)),
            timeout=30)
        stop = threading.Event()
        replies = append_pb2_grpc.AppendStub(channel).Append(_commands(stop), timeout=60)
        try:
            for reply in replies:
                if reply.HasField("data_appended"):
                    assert reply.data_appended.offset == acked
                    acked += reply.data_appended.event_count
                    if acked >= ACKED_BEFORE_KILL:
                        assert server.kill() == -9
                        break
        except grpc.RpcError:
            pass  # the kill may cut the stream before the break
        finally:
            stop.set()
            replies.cancel()  # type: ignore[no-untyped-call]  # grpc-stubs: cancel() unannotated
    assert acked >= ACKED_BEFORE_KILL

    restarted = start_standalone(bookie_processes, data_dir)
    with grpc.insecure_channel(restarted.address) as channel:
        info = admin_pb2_grpc.AdminStub(channel).GetSegmentInfo(
            admin_pb2.GetSegmentInfoRequest(segment="crash/0"), timeout=30)
        end = info.segment.end_offset
        assert end >= acked
        assert end % BLOCK_EVENTS == 0  # blocks are atomic: all of one or none
        assert len(info.ledgers) >= 3
        assert all(ledger.closed for ledger in info.ledgers[:-1])
        events = read_payloads(channel, "crash/0", until_offset=end)
        assert events == [_payload(n) for n in range(end)]
        # The writer's next block continues right after the recovered end.
        answers = append_payloads(channel, "crash/0", "writer-2", [[b"next"]])
        assert answers[1].data_appended.offset == end
    assert restarted.terminate() == 0
    log = restarted.log()
    assert "never retrieved" not in log  # issue 13: startup after a crash
    assert "Traceback" not in log, log[-3000:]


def test_sigterm_stops_gracefully_and_closes_ledgers(
    bookie_processes: BookieProcesses, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    server = start_standalone(bookie_processes, data_dir)
    with grpc.insecure_channel(server.address) as channel:
        admin_pb2_grpc.AdminStub(channel).CreateTopic(
            admin_pb2.CreateTopicRequest(name="crash"), timeout=30)
        append_payloads(channel, "crash/0", "w", [[b"a", b"b"]])
    assert server.terminate() == 0
    assert "stopped" in server.log()

    restarted = start_standalone(bookie_processes, data_dir)
    with grpc.insecure_channel(restarted.address) as channel:
        info = admin_pb2_grpc.AdminStub(channel).GetSegmentInfo(
            admin_pb2.GetSegmentInfoRequest(segment="crash/0"), timeout=30)
        assert info.segment.end_offset == 2
        assert all(ledger.closed for ledger in info.ledgers[:-1])
        assert read_payloads(channel, "crash/0", until_offset=2) == [b"a", b"b"]
    assert restarted.interrupt() == 0


def test_sigterm_under_load_answers_started_appends_then_ends_streams(
    bookie_processes: BookieProcesses, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    server = start_standalone(bookie_processes, data_dir)
    acked = 0
    with grpc.insecure_channel(server.address) as channel:
        admin_pb2_grpc.AdminStub(channel).CreateTopic(
            admin_pb2.CreateTopicRequest(name="crash"), timeout=30)
        stop = threading.Event()
        replies = append_pb2_grpc.AppendStub(channel).Append(_commands(stop), timeout=60)
        with pytest.raises(grpc.RpcError) as ended:
            for reply in replies:
                if reply.HasField("data_appended"):
                    assert reply.data_appended.offset == acked
                    acked += reply.data_appended.event_count
                    if acked >= ACKED_BEFORE_KILL and not stop.is_set():
                        stop.set()  # the generator sends a few more blocks at most
                        server.process.terminate()
        assert ended.value.code() == grpc.StatusCode.UNAVAILABLE
        metadata = trailers(ended.value)
        assert metadata.get("folio-error") == "BrokerShuttingDownError"
    assert server.terminate() == 0

    restarted = start_standalone(bookie_processes, data_dir)
    with grpc.insecure_channel(restarted.address) as channel:
        info = admin_pb2_grpc.AdminStub(channel).GetSegmentInfo(
            admin_pb2.GetSegmentInfoRequest(segment="crash/0"), timeout=30)
        # Every append the server started before stopping was answered: nothing
        # durable went unacknowledged, so the segment ends exactly where the acks did.
        assert info.segment.end_offset == acked
        assert read_payloads(channel, "crash/0", until_offset=acked) == [
            _payload(n) for n in range(acked)]
    assert restarted.terminate() == 0
