"""What fuzzing found (issue 13, section 2), against a real ``folio standalone``.

Produce to a sealed topic, garbage sent to the health service, and the
reflection service asked in both protocol generations (v1 and v1alpha).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2

from folio._status import error_from_rpc
from folio.api.v1 import admin_pb2, admin_pb2_grpc, append_pb2, append_pb2_grpc
from folio.errors import SegmentSealedError
from tests.support.bookies import BookieProcess


@pytest.fixture(scope="module")
def channel(server: BookieProcess) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(server.address) as made:
        yield made


@pytest.mark.parametrize("keyed", [False, True], ids=["keyless", "keyed"])
def test_produce_to_a_sealed_topic_is_failed_precondition(
        channel: grpc.Channel, keyed: bool) -> None:
    admin = admin_pb2_grpc.AdminStub(channel)
    topic = f"sealed-{'keyed' if keyed else 'keyless'}"
    admin.CreateTopic(admin_pb2.CreateTopicRequest(
        name=topic, segment_count=3), timeout=30)
    admin.SealTopic(admin_pb2.SealTopicRequest(name=topic), timeout=30)
    event = (append_pb2.ProduceEvent(payload=b"x", routing_key="k") if keyed
             else append_pb2.ProduceEvent(payload=b"x"))
    produce = append_pb2_grpc.ProduceStub(channel)
    with pytest.raises(grpc.RpcError) as raised:
        produce.Produce(append_pb2.ProduceRequest(topic=topic, events=[event]), timeout=30)
    error: Any = raised.value
    assert error.code() is grpc.StatusCode.FAILED_PRECONDITION
    assert error.details() == f"topic '{topic}' is sealed: it takes no more events"
    metadata = dict(error.trailing_metadata())
    assert metadata["folio-error"] == "TopicSealedError"
    assert json.loads(metadata["folio-error-context"]) == {"topic": topic}
    assert metadata["folio-error-code"] == "7"  # ErrorCode.ERROR_CODE_TOPIC_SEALED


def test_the_sdk_reads_a_sealed_topic_refusal_as_segment_sealed(
        channel: grpc.Channel) -> None:
    admin = admin_pb2_grpc.AdminStub(channel)
    admin.CreateTopic(admin_pb2.CreateTopicRequest(name="sealed-sdk"), timeout=30)
    admin.SealTopic(admin_pb2.SealTopicRequest(name="sealed-sdk"), timeout=30)
    produce = append_pb2_grpc.ProduceStub(channel)
    with pytest.raises(grpc.RpcError) as raised:
        produce.Produce(append_pb2.ProduceRequest(
            topic="sealed-sdk", events=[append_pb2.ProduceEvent(payload=b"x")]), timeout=30)
    typed = error_from_rpc(raised.value)
    assert isinstance(typed, SegmentSealedError)
    assert typed.error_name == "TopicSealedError"


def test_health_answers_garbage_with_invalid_argument_and_no_traceback(
        server: BookieProcess, channel: grpc.Channel) -> None:
    raw_check = channel.unary_unary("/grpc.health.v1.Health/Check",
                                    request_serializer=lambda data: data,
                                    response_deserializer=lambda data: data)
    for _ in range(3):
        with pytest.raises(grpc.RpcError) as raised:
            raw_check(b"\xff\xff\xff\xff\x0f garbage", timeout=30)
        error: Any = raised.value
        assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert "grpc.health.v1.HealthCheckRequest" in error.details()
    raw_watch = channel.unary_stream("/grpc.health.v1.Health/Watch",
                                     request_serializer=lambda data: data,
                                     response_deserializer=lambda data: data)
    with pytest.raises(grpc.RpcError) as raised:
        list(raw_watch(b"\xff\xff\xff\xff\x0f garbage", timeout=30))
    assert raised.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    # Still healthy, and the log holds no traceback for any of it.
    health = health_pb2_grpc.HealthStub(channel)
    assert health.Check(health_pb2.HealthCheckRequest(), timeout=10).status \
        == health_pb2.HealthCheckResponse.SERVING
    log = server.log()
    assert "Traceback" not in log, log[-3000:]


@pytest.mark.parametrize("package", ["grpc.reflection.v1", "grpc.reflection.v1alpha"])
def test_reflection_lists_the_services_in_v1_and_v1alpha(
        channel: grpc.Channel, package: str) -> None:
    info = channel.stream_stream(
        f"/{package}.ServerReflection/ServerReflectionInfo",
        request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
        response_deserializer=reflection_pb2.ServerReflectionResponse.FromString)
    requests = [reflection_pb2.ServerReflectionRequest(list_services=""),
                reflection_pb2.ServerReflectionRequest(file_containing_symbol="folio.v1.Admin")]
    listed, described = list(info(iter(requests), timeout=30))
    names = {service.name for service in listed.list_services_response.service}
    assert {"folio.v1.Admin", "folio.v1.Append", "folio.v1.Produce", "folio.v1.Read",
            "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection",
            "grpc.reflection.v1alpha.ServerReflection"} <= names
    assert described.file_descriptor_response.file_descriptor_proto
