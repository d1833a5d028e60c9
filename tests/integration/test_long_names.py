"""Names far too long, on every RPC of every public service: a precise refusal, a short message.

Issue 13: a 20,000-character topic name made GetTopic and friends fail with
RESOURCE_EXHAUSTED (the echoed name broke gRPC's metadata limit) and a 10 MB
name came back as a 10 MB message. Each RPC that takes a name must answer
INVALID_ARGUMENT naming the rule, and no status message or error context may
be longer than a small bound, whatever the request carried.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest

from folio.api.v1 import (
    admin_pb2,
    admin_pb2_grpc,
    append_pb2,
    append_pb2_grpc,
    groups_pb2,
    groups_pb2_grpc,
    read_pb2,
    read_pb2_grpc,
    transactions_pb2,
    transactions_pb2_grpc,
)
from tests.support.bookies import BookieProcess

#: What any refusal may weigh, message and error context together.
_BOUND_CHARS = 1200

_Code = grpc.StatusCode


@pytest.fixture(scope="module")
def channel(server: BookieProcess) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(server.address, options=(
            ("grpc.max_send_message_length", 64 << 20),
            ("grpc.max_receive_message_length", 64 << 20))) as made:
        yield made


def _calls(channel: grpc.Channel, name: str) -> dict[str, Callable[[], Any]]:
    admin = admin_pb2_grpc.AdminStub(channel)
    produce = append_pb2_grpc.ProduceStub(channel)
    read = read_pb2_grpc.ReadStub(channel)
    txns = transactions_pb2_grpc.TransactionsStub(channel)
    groups = groups_pb2_grpc.ReaderGroupsStub(channel)
    segment = f"{name}/0"
    state = groups_pb2.ReaderGroupState(topics=[name])
    return {
        "Admin.CreateTopic": lambda: admin.CreateTopic(admin_pb2.CreateTopicRequest(name=name)),
        "Admin.GetTopic": lambda: admin.GetTopic(admin_pb2.GetTopicRequest(name=name)),
        "Admin.DeleteTopic": lambda: admin.DeleteTopic(admin_pb2.DeleteTopicRequest(name=name)),
        "Admin.UpdateTopicConfig": lambda: admin.UpdateTopicConfig(
            admin_pb2.UpdateTopicConfigRequest(name=name)),
        "Admin.GetSegments": lambda: admin.GetSegments(
            admin_pb2.GetSegmentsRequest(topic=name)),
        "Admin.GetSegmentInfo": lambda: admin.GetSegmentInfo(
            admin_pb2.GetSegmentInfoRequest(segment=segment)),
        "Admin.TruncateSegment": lambda: admin.TruncateSegment(
            admin_pb2.TruncateSegmentRequest(segment=segment, offset=1)),
        "Admin.ScaleTopic": lambda: admin.ScaleTopic(
            admin_pb2.ScaleTopicRequest(topic=name)),
        "Admin.ScaleTopic(seal)": lambda: admin.ScaleTopic(
            admin_pb2.ScaleTopicRequest(topic="t", seal=[segment])),
        "Admin.GetSuccessors": lambda: admin.GetSuccessors(
            admin_pb2.GetSuccessorsRequest(segment=segment)),
        "Admin.SealTopic": lambda: admin.SealTopic(admin_pb2.SealTopicRequest(name=name)),
        "Produce.Produce": lambda: produce.Produce(append_pb2.ProduceRequest(
            topic=name, events=[append_pb2.ProduceEvent(payload=b"x")])),
        "Read.Read": lambda: list(read.Read(read_pb2.ReadRequest(segment=segment))),
        "Transactions.BeginTxn": lambda: txns.BeginTxn(
            transactions_pb2.BeginTxnRequest(label=name)),
        "Transactions.CommitTxn": lambda: txns.CommitTxn(transactions_pb2.CommitTxnRequest(
            txn_ids=[b"\x01" * 16], commit_key=name, commit_sequence=1)),
        "Transactions.AbortTxn": lambda: txns.AbortTxn(
            transactions_pb2.AbortTxnRequest(txn_id=name.encode())),
        "Transactions.AbortTxns": lambda: txns.AbortTxns(
            transactions_pb2.AbortTxnsRequest(label=name)),
        "Transactions.GetTxnStatus": lambda: txns.GetTxnStatus(
            transactions_pb2.GetTxnStatusRequest(txn_id=name.encode())),
        "ReaderGroups.CreateReaderGroup": lambda: groups.CreateReaderGroup(
            groups_pb2.CreateReaderGroupRequest(name=name)),
        "ReaderGroups.CreateReaderGroup(state)": lambda: groups.CreateReaderGroup(
            groups_pb2.CreateReaderGroupRequest(name="g", state=state)),
        "ReaderGroups.GetReaderGroup": lambda: groups.GetReaderGroup(
            groups_pb2.GetReaderGroupRequest(name=name)),
        "ReaderGroups.UpdateReaderGroup": lambda: groups.UpdateReaderGroup(
            groups_pb2.UpdateReaderGroupRequest(name=name)),
        "ReaderGroups.DeleteReaderGroup": lambda: groups.DeleteReaderGroup(
            groups_pb2.DeleteReaderGroupRequest(name=name)),
    }


_RPCS = sorted(_calls(grpc.insecure_channel("127.0.0.1:1"), "x"))


@pytest.mark.parametrize("size", [20_000, 10_000_000], ids=["20k", "10M"])
@pytest.mark.parametrize("rpc", _RPCS)
def test_a_long_name_is_refused_precisely_and_briefly(
        channel: grpc.Channel, rpc: str, size: int) -> None:
    name = "t" * size
    with pytest.raises(grpc.RpcError) as raised:
        _calls(channel, name)[rpc]()
    error: Any = raised.value
    details = error.details() or ""
    context = dict(error.trailing_metadata() or ()).get("folio-error-context", "")
    assert len(details) + len(context) < _BOUND_CHARS, details[:200]
    if rpc in ("Transactions.AbortTxn", "Transactions.GetTxnStatus"):
        # A txn id is 16 bytes: the refusal says so, without echoing the bytes.
        assert error.code() is _Code.INVALID_ARGUMENT, details
        assert "16 bytes" in details
        return
    assert error.code() is _Code.INVALID_ARGUMENT, details
    # Segment names are "<name>/0": two characters more.
    assert f"got {size}" in details or f"got {size + 2}" in details, details
    assert "must be 1 to" in details or "bytes of UTF-8" in details


@pytest.mark.parametrize("size", [20_000, 10_000_000], ids=["20k", "10M"])
def test_a_long_segment_on_the_append_stream_refuses_that_flow_briefly(
        channel: grpc.Channel, size: int) -> None:
    stub = append_pb2_grpc.AppendStub(channel)
    command = append_pb2.AppendCommand(request_id=1 << 32, setup_append=append_pb2.SetupAppend(
        segment="s" * size + "/0", writer_id="w"))
    replies = list(stub.Append(iter([command]), timeout=60))
    assert len(replies) == 1
    reply = replies[0]
    assert reply.WhichOneof("reply") == "append_failed"
    assert reply.append_failed.code == _Code.INVALID_ARGUMENT.value[0]
    assert f"segment name must be 1 to 260 characters, got {size + 2}" \
        == reply.append_failed.message
    assert reply.ByteSize() < _BOUND_CHARS


def test_a_long_name_in_a_known_error_is_clipped_in_message_and_context(
        channel: grpc.Channel) -> None:
    # A name within the length rule but not valid: the domain refuses it and
    # the message quotes at most a short prefix.
    admin = admin_pb2_grpc.AdminStub(channel)
    with pytest.raises(grpc.RpcError) as raised:
        admin.GetSegmentInfo(admin_pb2.GetSegmentInfoRequest(segment="q" * 250 + "/0"))
    error: Any = raised.value
    assert error.code() is _Code.NOT_FOUND
    assert "…(252 chars)" in error.details()
    assert len(error.details()) < 200
