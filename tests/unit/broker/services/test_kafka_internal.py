"""The ``KafkaInternal`` servicer on a real gRPC server: refused until the listener serves
(forwarded batches and offsets by time).

The gRPC server starts before the Kafka listener, which sets its handler in
the slot once it serves (``broker.services.kafka_internal``): until then a
forwarded batch is refused UNAVAILABLE (the calling broker asks again), and
a refusal of the handler comes back with its status and metadata.
"""

from __future__ import annotations

import grpc

from broker._proto.v1 import kafka_internal_pb2, kafka_internal_pb2_grpc
from broker.errors import WrongHostError
from broker.services._handlers import add_servicer
from broker.services.kafka_internal import KafkaForwardSlot, KafkaInternalServicer
from tests.support.trailers import trailers


async def test_a_forwarded_batch_waits_for_the_listener() -> None:
    slot = KafkaForwardSlot()
    server = grpc.aio.server()
    add_servicer(server, kafka_internal_pb2.DESCRIPTOR.services_by_name["KafkaInternal"],
                 KafkaInternalServicer(slot))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    request = kafka_internal_pb2.AppendKafkaBatchRequest(
        segment="t/1", writer_id="kafka:1:0@0", last_event_number=3, event_count=2, data=b"x")
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = kafka_internal_pb2_grpc.KafkaInternalStub(channel)
            try:
                await stub.AppendKafkaBatch(request, timeout=10)
            except grpc.aio.AioRpcError as error:
                assert error.code() is grpc.StatusCode.UNAVAILABLE
                assert "no Kafka listener" in (error.details() or "")
            else:
                raise AssertionError("answered without a listener")

            seen: list[kafka_internal_pb2.AppendKafkaBatchRequest] = []

            async def handler(got: kafka_internal_pb2.AppendKafkaBatchRequest
                              ) -> kafka_internal_pb2.AppendKafkaBatchResponse:
                seen.append(got)
                if got.segment == "t/9":
                    raise WrongHostError("t/9", "other:1")
                return kafka_internal_pb2.AppendKafkaBatchResponse(error_code=0, base_offset=7)

            slot.handler = handler
            answer = await stub.AppendKafkaBatch(request, timeout=10)
            assert (answer.error_code, answer.base_offset) == (0, 7)
            assert seen == [request]
            try:
                await stub.AppendKafkaBatch(kafka_internal_pb2.AppendKafkaBatchRequest(
                    segment="t/9", data=b"x", event_count=1), timeout=10)
            except grpc.aio.AioRpcError as error:
                assert error.code() is grpc.StatusCode.UNAVAILABLE
                assert trailers(error).get("folio-error") == "WrongHostError"
            else:
                raise AssertionError("a WrongHost was answered as a success")
    finally:
        await server.stop(None)


async def test_an_offset_by_time_waits_for_the_listener() -> None:
    slot = KafkaForwardSlot()
    server = grpc.aio.server()
    add_servicer(server, kafka_internal_pb2.DESCRIPTOR.services_by_name["KafkaInternal"],
                 KafkaInternalServicer(slot))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    request = kafka_internal_pb2.OffsetForTimeRequest(segment="t/1", timestamp_ms=5)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = kafka_internal_pb2_grpc.KafkaInternalStub(channel)
            try:
                await stub.OffsetForTime(request, timeout=10)
            except grpc.aio.AioRpcError as error:
                assert error.code() is grpc.StatusCode.UNAVAILABLE
                assert "no Kafka listener" in (error.details() or "")
            else:
                raise AssertionError("answered without a listener")

            async def handler(got: kafka_internal_pb2.OffsetForTimeRequest
                              ) -> kafka_internal_pb2.OffsetForTimeResponse:
                if got.segment == "t/9":
                    raise WrongHostError("t/9", "other:1")
                return kafka_internal_pb2.OffsetForTimeResponse(offset=3, timestamp_ms=6,
                                                                end_offset=8)

            slot.offset_for_time = handler
            answer = await stub.OffsetForTime(request, timeout=10)
            assert (answer.offset, answer.timestamp_ms, answer.end_offset) == (3, 6, 8)
            try:
                await stub.OffsetForTime(kafka_internal_pb2.OffsetForTimeRequest(segment="t/9"),
                                         timeout=10)
            except grpc.aio.AioRpcError as error:
                assert error.code() is grpc.StatusCode.UNAVAILABLE
                assert trailers(error).get("folio-error") == "WrongHostError"
            else:
                raise AssertionError("a WrongHost was answered as a success")
    finally:
        await server.stop(None)
