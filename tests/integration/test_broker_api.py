"""The public gRPC API of a real ``folio standalone``, spoken with the raw stubs.

Every refusal of the bad-input table is a precise status with the exact error
class in ``folio-error``; a client sending garbage (raw bytes on the socket,
undecodable messages) gets an answer, and the server keeps serving.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from folio.api.v1 import (
    admin_pb2,
    admin_pb2_grpc,
    append_pb2,
    append_pb2_grpc,
    read_pb2,
    read_pb2_grpc,
)
from folio.api.v1.block import encode_block
from tests.support.bookies import BookieProcess, BookieProcesses
from tests.support.standalone import append_payloads, read_payloads, start_standalone
from tests.support.trailers import trailers


@pytest.fixture
def server(bookie_processes: BookieProcesses, tmp_path: Path) -> BookieProcess:
    return start_standalone(bookie_processes, tmp_path / "data")


@pytest.fixture
def channel(server: BookieProcess) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(server.address) as channel:
        yield channel


def _error(call_error: grpc.RpcError) -> tuple[grpc.StatusCode, str, dict[str, object]]:
    metadata = trailers(call_error)
    context = json.loads(metadata.get("folio-error-context", "{}"))
    return call_error.code(), str(metadata.get("folio-error")), context


def _refusal(call: object, *args: object) -> tuple[grpc.StatusCode, str, dict[str, object], str]:
    with pytest.raises(grpc.RpcError) as caught:
        call(*args, timeout=30)  # type: ignore[operator]
    code, name, context = _error(caught.value)
    details = caught.value.details()
    assert details is not None
    return code, name, context, details


def test_health_and_admin_round_trip(channel: grpc.Channel) -> None:
    health = health_pb2_grpc.HealthStub(channel)
    for service in ("", "folio.v1.Admin", "folio.v1.Append", "folio.v1.Read", "folio.v1.Produce"):
        answer = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=10)
        assert answer.status == health_pb2.HealthCheckResponse.SERVING
    admin = admin_pb2_grpc.AdminStub(channel)
    topic = admin.CreateTopic(admin_pb2.CreateTopicRequest(
        name="orders", segment_count=4, config=admin_pb2.TopicConfig(retention_ms=60_000)),
        timeout=30)
    assert [s.name for s in topic.segments] == [f"orders/{n}" for n in range(4)]
    assert [s.key_low for s in topic.segments] == [0.0, 0.25, 0.5, 0.75]
    assert topic.segments[-1].key_high == 1.0
    assert topic.config.retention_ms == 60_000
    assert topic.config.max_event_bytes == 1024 * 1024
    assert [t.name for t in admin.ListTopics(admin_pb2.ListTopicsRequest(), timeout=30).topics] \
        == ["orders"]
    updated = admin.UpdateTopicConfig(admin_pb2.UpdateTopicConfigRequest(
        name="orders", config=admin_pb2.TopicConfig(max_event_bytes=1000)), timeout=30)
    assert updated.config.max_event_bytes == 1000
    assert updated.config.retention_ms == 60_000
    info = admin.GetSegmentInfo(admin_pb2.GetSegmentInfoRequest(segment="orders/2"), timeout=30)
    assert (info.segment.start_offset, info.segment.end_offset, info.sealed) == (0, 0, False)
    admin.DeleteTopic(admin_pb2.DeleteTopicRequest(name="orders"), timeout=30)
    assert list(admin.ListTopics(admin_pb2.ListTopicsRequest(), timeout=30).topics) == []


def test_a_standalone_owns_every_segment(channel: grpc.Channel, server: BookieProcess) -> None:
    admin = admin_pb2_grpc.AdminStub(channel)
    topic = admin.CreateTopic(admin_pb2.CreateTopicRequest(name="owned", segment_count=2),
                              timeout=30)
    assert [s.owner for s in topic.segments] == [server.address] * 2
    segments = admin.GetSegments(admin_pb2.GetSegmentsRequest(topic="owned"), timeout=30)
    assert [s.owner for s in segments.segments] == [server.address] * 2
    found = admin.LookupSegment(admin_pb2.LookupSegmentRequest(segment="owned/1"), timeout=30)
    assert (found.segment, found.owner) == ("owned/1", server.address)
    brokers = admin.ListBrokers(admin_pb2.ListBrokersRequest(), timeout=30)
    assert [(b.address, list(b.containers)) for b in brokers.brokers] == [(server.address, [])]
    assert brokers.container_count == 0
    with pytest.raises(grpc.RpcError) as caught:
        admin.LookupSegment(admin_pb2.LookupSegmentRequest(segment="owned/7"), timeout=30)
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND


def test_bad_input_gets_precise_statuses(channel: grpc.Channel) -> None:
    admin = admin_pb2_grpc.AdminStub(channel)
    produce = append_pb2_grpc.ProduceStub(channel)
    admin.CreateTopic(admin_pb2.CreateTopicRequest(
        name="t", config=admin_pb2.TopicConfig(max_event_bytes=100)), timeout=30)

    code, name, context, _ = _refusal(admin.GetTopic, admin_pb2.GetTopicRequest(name="nope"))
    assert (code, name, context) == (grpc.StatusCode.NOT_FOUND, "TopicNotFoundError",
                                     {"topic": "nope"})
    for bad in ("", "has space", "x" * 250, "a/b", ".", ".."):
        code, name, _, _ = _refusal(admin.CreateTopic, admin_pb2.CreateTopicRequest(name=bad))
        assert (code, name) == (grpc.StatusCode.INVALID_ARGUMENT, "TopicNameError"), bad
    for system in ("__folio_system", "_txnlog"):
        code, name, _, _ = _refusal(admin.CreateTopic,
                                    admin_pb2.CreateTopicRequest(name=system))
        assert (code, name) == (grpc.StatusCode.PERMISSION_DENIED, "InternalTopicError"), system
    for kafka_name in ("_system", ".hidden"):  # names Kafka accepts
        made = admin.CreateTopic(admin_pb2.CreateTopicRequest(name=kafka_name), timeout=30)
        assert made.name == kafka_name
    code, _, _, details = _refusal(
        admin.CreateTopic, admin_pb2.CreateTopicRequest(name="many", segment_count=1025))
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert "1024" in details
    code, _, _, details = _refusal(admin.CreateTopic, admin_pb2.CreateTopicRequest(
        name="cfg", config=admin_pb2.TopicConfig(max_event_bytes=0)))
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert "max_event_bytes" in details
    code, name, _, _ = _refusal(admin.CreateTopic, admin_pb2.CreateTopicRequest(name="t"))
    assert (code, name) == (grpc.StatusCode.ALREADY_EXISTS, "TopicExistsError")
    code, name, context, details = _refusal(produce.Produce, append_pb2.ProduceRequest(
        topic="t", events=[append_pb2.ProduceEvent(payload=b"x" * 101)]))
    assert (code, name) == (grpc.StatusCode.RESOURCE_EXHAUSTED, "EventTooLargeError")
    assert context == {"size": 101, "limit": 100}
    assert "100" in details
    code, name, _, _ = _refusal(produce.Produce, append_pb2.ProduceRequest(
        topic="nope", events=[append_pb2.ProduceEvent(payload=b"x")]))
    assert (code, name) == (grpc.StatusCode.NOT_FOUND, "TopicNotFoundError")
    code, name, _, _ = _refusal(
        admin.GetSegmentInfo, admin_pb2.GetSegmentInfoRequest(segment="t/7"))
    assert (code, name) == (grpc.StatusCode.NOT_FOUND, "NoSuchSegmentError")
    reader = read_pb2_grpc.ReadStub(channel)
    code, name, context, _ = _refusal(
        lambda request, timeout: list(reader.Read(request, timeout=timeout)),
        read_pb2.ReadRequest(segment="t/0", offset=5))
    assert (code, name) == (grpc.StatusCode.OUT_OF_RANGE, "OffsetOutOfRangeError")
    assert (context["start_offset"], context["end_offset"]) == (0, 0)
    code, _, _, _ = _refusal(
        lambda request, timeout: list(reader.Read(request, timeout=timeout)),
        read_pb2.ReadRequest(segment="t/0", offset=-1))
    assert code == grpc.StatusCode.INVALID_ARGUMENT


def test_append_protocol_replies_and_duplicates(channel: grpc.Channel) -> None:
    admin = admin_pb2_grpc.AdminStub(channel)
    admin.CreateTopic(admin_pb2.CreateTopicRequest(name="t"), timeout=30)
    replies = append_payloads(channel, "t/0", "w1", [[b"a", b"b"], [b"c"]])
    assert replies[0].append_setup.last_event_number == -1
    assert [(r.request_id & 0xFFFFFFFF, r.data_appended.offset, r.data_appended.event_number)
            for r in replies[1:]] == [(1, 0, 1), (2, 2, 2)]
    # The same writer resending its last block: a duplicate, not written again.
    again = append_payloads(channel, "t/0", "w1", [[b"c"]], first_event_number=2)
    assert again[0].append_setup.last_event_number == 2
    assert again[1].data_appended.duplicate
    assert read_payloads(channel, "t/0", until_offset=3) == [b"a", b"b", b"c"]
    # Held blocks are written as one entry when `end` arrives; only it is answered.
    stub = append_pb2_grpc.AppendStub(channel)
    flow = 7 << 32
    commands = [
        append_pb2.AppendCommand(request_id=flow, setup_append=append_pb2.SetupAppend(
            segment="t/0", writer_id="w2")),
        append_pb2.AppendCommand(request_id=flow | 1, append_block=append_pb2.AppendBlock(
            data=encode_block([b"d"]), event_count=1, last_event_number=0, end=False)),
        append_pb2.AppendCommand(request_id=flow | 2, append_block=append_pb2.AppendBlock(
            data=encode_block([b"e"]), event_count=1, last_event_number=1, end=True)),
        append_pb2.AppendCommand(request_id=(8 << 32) | 1, append_block=append_pb2.AppendBlock(
            data=encode_block([b"z"]), event_count=1, last_event_number=0, end=True)),
        append_pb2.AppendCommand(request_id=(9 << 32), setup_append=append_pb2.SetupAppend(
            segment="t/9", writer_id="w3")),
        append_pb2.AppendCommand(request_id=(10 << 32), setup_append=append_pb2.SetupAppend(
            segment="t/0", writer_id="")),
    ]
    replies = list(stub.Append(iter(commands), timeout=30))
    by_id = {reply.request_id: reply for reply in replies}
    assert len(replies) == 5
    assert by_id[flow].append_setup.last_event_number == -1
    assert (by_id[flow | 2].data_appended.offset, by_id[flow | 2].data_appended.event_count) \
        == (3, 2)
    assert by_id[(8 << 32) | 1].WhichOneof("reply") == "no_such_segment"
    assert by_id[9 << 32].WhichOneof("reply") == "no_such_segment"
    assert by_id[10 << 32].append_failed.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert read_payloads(channel, "t/0", 3, until_offset=5) == [b"d", b"e"]


def test_garbage_from_a_client_leaves_the_server_serving(
    server: BookieProcess, channel: grpc.Channel
) -> None:
    admin = admin_pb2_grpc.AdminStub(channel)
    admin.CreateTopic(admin_pb2.CreateTopicRequest(name="t"), timeout=30)
    # Not HTTP/2 at all.
    with socket.create_connection((server.host, server.port), timeout=10) as raw:
        raw.sendall(b"\x00\xff garbage that is not a gRPC frame \r\n\r\n" * 100)
        raw.settimeout(10)
        try:
            while raw.recv(65536):
                pass
        except OSError:
            pass
    # Well-formed HTTP/2 and gRPC, but the message bytes are not the request type.
    raw_create = channel.unary_unary("/folio.v1.Admin/CreateTopic",
                                     request_serializer=lambda data: data,
                                     response_deserializer=lambda data: data)
    with pytest.raises(grpc.RpcError) as caught:
        raw_create(b"\xff\xff\xff\xff\x0f garbage", timeout=30)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "folio.v1.CreateTopicRequest" in (caught.value.details() or "")
    assert trailers(caught.value)[
        "folio-error-code"] == "1"  # ErrorCode.ERROR_CODE_INVALID_ARGUMENT
    raw_append = channel.stream_stream("/folio.v1.Append/Append",
                                       request_serializer=lambda data: data,
                                       response_deserializer=lambda data: data)
    with pytest.raises(grpc.RpcError) as caught:
        list(raw_append(iter([b"\x0a\xff\xff\xff\xff\xff"]), timeout=30))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "folio.v1.AppendCommand" in (caught.value.details() or "")
    # An AppendCommand that sets no command ends that stream with INVALID_ARGUMENT.
    stub = append_pb2_grpc.AppendStub(channel)
    with pytest.raises(grpc.RpcError) as caught:
        list(stub.Append(iter([append_pb2.AppendCommand(request_id=1)]), timeout=30))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    # Still serving, and still correct.
    assert server.running()
    append_payloads(channel, "t/0", "w", [[b"after"]])
    assert read_payloads(channel, "t/0", until_offset=1) == [b"after"]
