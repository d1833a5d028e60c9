"""Transactions and exactly-once writes against a real ``folio standalone``, raw gRPC only.

* A 10 MiB transaction (held blocks + end) is one ledger entry: while it is
  held, readers see none of it; another writer's blocks sent in between land
  before or after it, never inside.
* A client ignoring the 16 MiB limit gets RESOURCE_EXHAUSTED; the server keeps
  serving.
* Overlapping event numbers get InvalidEventNumber.
* After SIGKILL and a restart, a writer whose last append is many ledgers back
  is still known: SetupAppend returns its number and its resend is a duplicate.
"""

from __future__ import annotations

import queue
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from folio.api.v1 import admin_pb2, admin_pb2_grpc, append_pb2, append_pb2_grpc
from folio.api.v1.block import encode_block
from tests.support.bookies import BookieProcess, BookieProcesses
from tests.support.standalone import append_payloads, read_payloads, start_standalone

MIB = 1024 * 1024
_Command = append_pb2.AppendCommand


@pytest.fixture
def server(bookie_processes: BookieProcesses, tmp_path: Path) -> BookieProcess:
    return start_standalone(bookie_processes, tmp_path / "data")


@pytest.fixture
def channel(server: BookieProcess) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(server.address) as channel:
        yield channel


class _Stream:
    """A raw Append stream fed command by command (a queue), its replies read one by one."""

    def __init__(self, channel: grpc.Channel) -> None:
        self._commands: queue.Queue[_Command | None] = queue.Queue()
        # iter(): the call is its own iterator; grpc-stubs gives CallIterator only __iter__.
        self._replies = iter(append_pb2_grpc.AppendStub(channel).Append(
            iter(self._commands.get, None), timeout=120))

    def setup(self, flow: int, segment: str, writer_id: str) -> append_pb2.AppendSetup:
        self._commands.put(_Command(request_id=flow << 32, setup_append=append_pb2.SetupAppend(
            segment=segment, writer_id=writer_id)))
        return self.reply().append_setup

    def block(self, flow: int, sequence: int, payloads: list[bytes], last: int, *,
              end: bool) -> None:
        self._commands.put(_Command(request_id=flow << 32 | sequence,
                                    append_block=append_pb2.AppendBlock(
                                        data=encode_block(payloads), event_count=len(payloads),
                                        last_event_number=last, end=end)))

    def reply(self) -> append_pb2.AppendReply:
        return next(self._replies)

    def close(self) -> None:
        self._commands.put(None)
        assert list(self._replies) == []


def _create(channel: grpc.Channel, name: str, **config: int) -> None:
    admin_pb2_grpc.AdminStub(channel).CreateTopic(admin_pb2.CreateTopicRequest(
        name=name, config=admin_pb2.TopicConfig(**config)), timeout=30)


def _end_offset(channel: grpc.Channel, segment: str) -> int:
    info = admin_pb2_grpc.AdminStub(channel).GetSegmentInfo(
        admin_pb2.GetSegmentInfoRequest(segment=segment), timeout=30)
    return int(info.segment.end_offset)


def test_a_10_mib_transaction_is_one_contiguous_run(channel: grpc.Channel) -> None:
    _create(channel, "txn")
    stream = _Stream(channel)
    assert stream.setup(1, "txn/0", "txn-writer").last_event_number == -1
    assert stream.setup(2, "txn/0", "plain-writer").last_event_number == -1
    txn = [[b"t%03d-%02d" % (b, e) + bytes(64 * 1024 - 7) for e in range(16)]
           for b in range(10)]  # 10 blocks of 16 events of 64 KiB: 10 MiB
    plain = 0
    for index, payloads in enumerate(txn[:-1]):
        stream.block(1, index + 1, payloads, 16 * index + 15, end=False)
        stream.block(2, index + 1, [b"p%03d" % plain], plain, end=True)  # between them
        assert stream.reply().data_appended.offset == plain
        plain += 1
        assert _end_offset(channel, "txn/0") == plain  # none of the transaction yet
    stream.block(1, 10, txn[-1], 159, end=True)
    committed = stream.reply()
    assert committed.request_id == 1 << 32 | 10
    appended = committed.data_appended
    assert (appended.offset, appended.event_count, appended.event_number) == (plain, 160, 159)
    stream.block(2, 10, [b"after"], plain, end=True)
    assert stream.reply().data_appended.offset == plain + 160
    stream.close()
    events = read_payloads(channel, "txn/0", until_offset=plain + 161)
    assert events[:plain] == [b"p%03d" % n for n in range(plain)]
    assert events[plain:plain + 160] == [event for block in txn for event in block]
    assert events[plain + 160:] == [b"after"]


def test_a_client_ignoring_the_16_mib_limit(server: BookieProcess,
                                            channel: grpc.Channel) -> None:
    _create(channel, "big")
    stream = _Stream(channel)
    stream.setup(1, "big/0", "greedy")
    block = [bytes(MIB - 300)] * 4  # 4 events, just under the block limit (4 MiB - 1 KiB)
    for sequence in range(1, 6):  # the 5th passes 16 MiB
        stream.block(1, sequence, block, 4 * sequence - 1, end=False)
    failed = stream.reply()
    assert failed.request_id == 1 << 32 | 5
    assert failed.append_failed.code == grpc.StatusCode.RESOURCE_EXHAUSTED.value[0]
    assert failed.append_failed.error == "TransactionTooLargeError"
    assert "16 MiB" in failed.append_failed.message
    for sequence in range(6, 9):  # it keeps sending: dropped
        stream.block(1, sequence, block, 4 * sequence - 1, end=False)
    stream.block(1, 9, [b"end"], 32, end=True)
    assert stream.reply().append_failed.error == "TransactionTooLargeError"
    # The server keeps serving, this stream and others; nothing was written.
    stream.block(1, 10, [b"small"], 0, end=True)
    assert stream.reply().data_appended.offset == 0
    stream.close()
    replies = append_payloads(channel, "big/0", "other", [[b"x"]])
    assert replies[1].data_appended.offset == 1
    assert read_payloads(channel, "big/0", until_offset=2) == [b"small", b"x"]
    assert server.running()


def test_overlapping_event_numbers_are_refused(channel: grpc.Channel) -> None:
    _create(channel, "nums")
    replies = append_payloads(channel, "nums/0", "w", [[b"a", b"b", b"c"]])  # 0..2
    assert replies[1].data_appended.event_number == 2
    stream = _Stream(channel)
    assert stream.setup(1, "nums/0", "w").last_event_number == 2
    stream.block(1, 1, [b"c", b"d"], 3, end=True)  # 2..3: overlaps
    invalid = stream.reply()
    assert invalid.WhichOneof("reply") == "invalid_event_number"
    assert invalid.invalid_event_number.expected_above == 2
    stream.block(1, 2, [b"d"], 3, end=False)  # held 3..3, then 3..4: goes back
    stream.block(1, 3, [b"d", b"e"], 4, end=True)
    assert stream.reply().invalid_event_number.expected_above == 3
    stream.block(1, 4, [b"c"], 2, end=True)  # all at or below 2: a duplicate
    assert stream.reply().data_appended.duplicate
    stream.block(1, 5, [b"d", b"e"], 4, end=True)
    assert stream.reply().data_appended.offset == 3
    stream.close()
    assert read_payloads(channel, "nums/0", until_offset=5) == [b"a", b"b", b"c", b"d", b"e"]


@pytest.mark.faults
def test_an_old_writer_survives_sigkill_across_rollovers(
    bookie_processes: BookieProcesses, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    server = start_standalone(bookie_processes, data_dir)
    with grpc.insecure_channel(server.address) as channel:
        _create(channel, "old", ledger_rollover_bytes=4096)
        old = append_payloads(channel, "old/0", "old-writer", [[b"o1", b"o2", b"o3"]])
        assert old[1].data_appended.event_number == 2
        busy = append_payloads(channel, "old/0", "busy-writer",
                               [[b"b%04d" % n + bytes(1000)] for n in range(60)])
        assert busy[-1].data_appended.offset == 62
        info = admin_pb2_grpc.AdminStub(channel).GetSegmentInfo(
            admin_pb2.GetSegmentInfoRequest(segment="old/0"), timeout=30)
        assert len(info.ledgers) > 5
    assert server.kill() == -9

    restarted = start_standalone(bookie_processes, data_dir)
    with grpc.insecure_channel(restarted.address) as channel:
        again = append_payloads(channel, "old/0", "old-writer", [[b"o1", b"o2", b"o3"]])
        assert again[0].append_setup.last_event_number == 2
        assert again[1].data_appended.duplicate
        busy = append_payloads(channel, "old/0", "busy-writer", [[b"next"]],
                               first_event_number=60)
        assert busy[0].append_setup.last_event_number == 59
        assert busy[1].data_appended.offset == 63
        events = read_payloads(channel, "old/0", until_offset=64)
        assert events[:3] == [b"o1", b"o2", b"o3"] and events[-1] == b"next"
        assert len(events) == 64
