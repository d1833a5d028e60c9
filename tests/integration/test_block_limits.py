"""The size and format rules of blocks, enforced by a real ``folio standalone``.

Spoken with the raw stubs, as an independent client would: ``max_event_bytes``
bounds every event of a block (not an average), a block is at most
``MAX_BLOCK_BYTES`` on Append and Produce, a block must hold the events its
``event_count`` states, and every ``ReadResponse`` fits gRPC's default 4 MiB
receive limit. Each refusal is answered and nothing of the refused request is
written.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import pairwise
from typing import Any

import grpc
import pytest

import folio
from broker.segments.block_limits import MAX_BLOCK_BYTES
from folio.api.v1 import (
    admin_pb2,
    admin_pb2_grpc,
    append_pb2,
    append_pb2_grpc,
    read_pb2,
    read_pb2_grpc,
)
from folio.api.v1.block import encode_block
from tests.support.bookies import BookieProcess
from tests.support.standalone import append_payloads, read_payloads

KIB = 1024
MIB = 1024 * KIB
#: gRPC's default receive limit, which a plain channel keeps.
GRPC_DEFAULT_MAX_RECEIVE_BYTES = 4 * MIB


@pytest.fixture
def channel(server: BookieProcess) -> Iterator[grpc.Channel]:
    """A channel with gRPC's defaults, except a send limit above the blocks sent."""
    with grpc.insecure_channel(server.address, options=[
            ("grpc.max_send_message_length", 32 * MIB)]) as made:
        yield made


def _create(channel: grpc.Channel, name: str, max_event_bytes: int = MIB) -> None:
    admin_pb2_grpc.AdminStub(channel).CreateTopic(admin_pb2.CreateTopicRequest(
        name=name, config=admin_pb2.TopicConfig(max_event_bytes=max_event_bytes)), timeout=30)


def _end_offset(channel: grpc.Channel, segment: str) -> int:
    info = admin_pb2_grpc.AdminStub(channel).GetSegmentInfo(
        admin_pb2.GetSegmentInfoRequest(segment=segment), timeout=30)
    return int(info.segment.end_offset)


def _append_raw(channel: grpc.Channel, segment: str, data: bytes,
                event_count: int) -> append_pb2.AppendReply:
    commands = [
        append_pb2.AppendCommand(request_id=1 << 32, setup_append=append_pb2.SetupAppend(
            segment=segment, writer_id="raw")),
        append_pb2.AppendCommand(request_id=(1 << 32) | 1, append_block=append_pb2.AppendBlock(
            data=data, event_count=event_count, last_event_number=event_count - 1, end=True)),
    ]
    replies = list(append_pb2_grpc.AppendStub(channel).Append(iter(commands), timeout=60))
    assert replies[0].WhichOneof("reply") == "append_setup"
    return replies[1]


def test_one_large_event_among_small_ones_is_refused(channel: grpc.Channel) -> None:
    _create(channel, "limits-event")
    payloads = [b"s" * 100] * 50 + [b"L" * (2 * MIB)] + [b"s" * 100] * 50
    reply = _append_raw(channel, "limits-event/0", encode_block(payloads), len(payloads))
    failed = reply.append_failed
    assert failed.code == grpc.StatusCode.RESOURCE_EXHAUSTED.value[0]
    assert failed.error == "EventTooLargeError"
    assert failed.error_code == 11  # ErrorCode.ERROR_CODE_EVENT_TOO_LARGE
    assert f"event of {2 * MIB} bytes exceeds the limit of {MIB} bytes" in failed.message
    assert not failed.retriable
    assert _end_offset(channel, "limits-event/0") == 0
    # The same stream's flows and the topic still take good blocks.
    ok = append_payloads(channel, "limits-event/0", "w", [[b"s" * 100] * 3, [b"x" * MIB]])
    assert [r.data_appended.offset for r in ok[1:]] == [0, 3]


def test_a_9_mib_block_is_refused_on_append(channel: grpc.Channel) -> None:
    _create(channel, "limits-block", max_event_bytes=4 * MIB)
    data = encode_block([b"x" * MIB] * 9)
    reply = _append_raw(channel, "limits-block/0", data, 9)
    failed = reply.append_failed
    assert failed.code == grpc.StatusCode.RESOURCE_EXHAUSTED.value[0]
    assert failed.error == "EventTooLargeError"
    assert f"block of {len(data)} bytes exceeds the limit of {MAX_BLOCK_BYTES}" in failed.message
    assert _end_offset(channel, "limits-block/0") == 0


def test_a_held_block_above_the_limit_fails_its_transaction(channel: grpc.Channel) -> None:
    _create(channel, "limits-held", max_event_bytes=4 * MIB)
    flow = 1 << 32
    commands = [
        append_pb2.AppendCommand(request_id=flow, setup_append=append_pb2.SetupAppend(
            segment="limits-held/0", writer_id="w")),
        append_pb2.AppendCommand(request_id=flow | 1, append_block=append_pb2.AppendBlock(
            data=encode_block([b"x" * MIB] * 5), event_count=5, last_event_number=4)),
        append_pb2.AppendCommand(request_id=flow | 2, append_block=append_pb2.AppendBlock(
            data=encode_block([b"y"]), event_count=1, last_event_number=5, end=True)),
    ]
    replies = list(append_pb2_grpc.AppendStub(channel).Append(iter(commands), timeout=60))
    by_id = {reply.request_id: reply for reply in replies}
    for request_id in (flow | 1, flow | 2):
        assert by_id[request_id].append_failed.code == \
            grpc.StatusCode.RESOURCE_EXHAUSTED.value[0]
        assert by_id[request_id].append_failed.error == "EventTooLargeError"
    assert _end_offset(channel, "limits-held/0") == 0


@pytest.mark.parametrize(("data", "event_count", "match"), [
    (encode_block([b"a", b"b"]), 3, "holds 2 payloads but states event_count 3"),
    (encode_block([b"a", b"b", b"c"]), 2, "holds 3 payloads but states event_count 2"),
    (b"\xff\xfe not a block", 1, "is not a folio.v1.EventBlock"),
])
def test_a_block_that_does_not_hold_its_event_count_is_refused(
        channel: grpc.Channel, data: bytes, event_count: int, match: str) -> None:
    segment = f"limits-count-{event_count}-{len(data)}"
    _create(channel, segment)
    failed = _append_raw(channel, f"{segment}/0", data, event_count).append_failed
    assert failed.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert failed.error == "InvalidBlockError"
    assert match in failed.message
    assert _end_offset(channel, f"{segment}/0") == 0


def test_produce_refuses_a_block_above_the_limit_and_writes_nothing(
        channel: grpc.Channel) -> None:
    _create(channel, "limits-produce")
    produce = append_pb2_grpc.ProduceStub(channel)
    events = [append_pb2.ProduceEvent(payload=b"p" * MIB) for _ in range(4)]  # 4 MiB in all
    with pytest.raises(grpc.RpcError) as raised:
        produce.Produce(append_pb2.ProduceRequest(topic="limits-produce", events=events),
                        timeout=60)
    error: Any = raised.value
    assert error.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert f"exceeds the limit of {MAX_BLOCK_BYTES} bytes" in error.details()
    assert dict(error.trailing_metadata())["folio-error"] == "EventTooLargeError"
    assert _end_offset(channel, "limits-produce/0") == 0
    placed = produce.Produce(append_pb2.ProduceRequest(
        topic="limits-produce", events=events[:3]), timeout=60)
    assert [event.offset for event in placed.events] == [0, 1, 2]


def test_every_read_response_fits_the_default_receive_limit(
        server: BookieProcess, channel: grpc.Channel) -> None:
    _create(channel, "limits-read", max_event_bytes=4 * MIB)
    framing = len(encode_block([b""]))
    biggest = [b"a" * (MAX_BLOCK_BYTES - framing - 3)]  # a block of exactly the limit
    assert len(encode_block(biggest)) == MAX_BLOCK_BYTES
    blocks = [biggest, [b"b" * (MIB - 64)] * 3, biggest]
    appended = append_payloads(channel, "limits-read/0", "w", blocks, timeout_s=60)
    assert all(r.WhichOneof("reply") == "data_appended" for r in appended[1:])
    # A plain channel keeps gRPC's 4 MiB receive limit; max_bytes far above it is capped.
    with grpc.insecure_channel(server.address) as plain:
        for max_bytes in (0, 64 * MIB):
            sizes = []
            served: list[tuple[int, int]] = []  # (first block's offset, next_offset)
            call: Any = read_pb2_grpc.ReadStub(plain).Read(read_pb2.ReadRequest(
                segment="limits-read/0", max_bytes=max_bytes, max_wait_ms=100), timeout=60)
            try:
                for response in call:
                    sizes.append(response.ByteSize())
                    if response.blocks:
                        served.append((response.blocks[0].offset, response.next_offset))
                    if response.next_offset >= 5:
                        break
            finally:
                call.cancel()
            assert sizes and max(sizes) <= GRPC_DEFAULT_MAX_RECEIVE_BYTES
            # A read step split over several responses: each response's next_offset
            # claims no offset that a later response still serves (read.proto).
            assert [first for first, _ in served] == [0, 1, 4]  # three blocks, one each
            assert all(next_offset <= later_first for (_, next_offset), (later_first, _)
                       in pairwise(served))
    assert len(read_payloads(channel, "limits-read/0", until_offset=5)) == 5


def test_the_sdk_refuses_an_event_that_cannot_fit_a_block(client: folio.Client) -> None:
    client.create_topic("limits-sdk", 1, max_event_bytes=4 * MIB)
    with client.writer("limits-sdk") as writer:
        with pytest.raises(folio.EventTooLargeError, match="does not fit in a block"):
            writer.write_event(b"x" * (4 * MIB))  # within max_event_bytes, not a block
        with pytest.raises(folio.EventTooLargeError, match="does not fit in a block"):
            writer.write_event(b"x" * (3 * MIB), headers={"big": b"h" * MIB})
        result = writer.write_event(b"x" * (MAX_BLOCK_BYTES - 100)).result(timeout=60)
    assert (result.segment, result.offset) == ("limits-sdk/0", 0)
    with client.reader("limits-sdk") as reader:
        event = reader.read_next(timeout=30)
    assert event is not None and len(event.payload) == MAX_BLOCK_BYTES - 100
