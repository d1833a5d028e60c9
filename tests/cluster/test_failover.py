"""Ownership and failover with real processes: ZooKeeper, 3 bookies (E=3, Qw=2, Qa=2), brokers.

Writers are raw gRPC clients following WrongHost (tests/support/cluster_client.py):
each appends numbered events to one segment and, at the end, every
acknowledged event must be in its segment exactly once, in order. Brokers ask
for 2 s ZooKeeper sessions, so a killed owner's containers are taken within
a few seconds.
"""

from __future__ import annotations

import json
import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest

import folio
from bench._cluster_client import (
    SegmentWriter,
    lookup_owner,
    read_segment,
)
from folio.api.v1 import (
    admin_pb2,
    admin_pb2_grpc,
    append_pb2,
    append_pb2_grpc,
    errors_pb2,
    events_pb2,
    read_pb2,
    read_pb2_grpc,
)
from tests.support.bookies import BookieProcesses
from tests.support.cluster_load import COUNT
from tests.support.cluster_load import start_cluster as _cluster
from tests.support.cluster_load import wait_spread as _spread
from tests.support.trailers import trailers as trailers_of
from tests.support.wait import wait_for

SEGMENTS = 4


class Writers:
    """One writer thread per segment, appending until stopped."""

    def __init__(self, brokers: list[str], topic: str) -> None:
        self.writers = [SegmentWriter(brokers, f"{topic}/{n}", f"w{n}")
                        for n in range(SEGMENTS)]
        self.failures: list[BaseException] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(w,), daemon=True)
                         for w in self.writers]
        for thread in self._threads:
            thread.start()

    def _run(self, writer: SegmentWriter) -> None:
        try:
            while not self._stop.is_set():
                writer.append_next()
        except BaseException as error:
            self.failures.append(error)

    def acked(self) -> list[int]:
        return [w.acknowledged for w in self.writers]

    def advance(self, more: int, what: str) -> None:
        """Wait until every writer has ``more`` acknowledged events beyond now."""
        targets = [a + more for a in self.acked()]
        wait_for(lambda: bool(self.failures) or all(
            a >= t for a, t in zip(self.acked(), targets, strict=True)), what, timeout_s=90)
        assert self.failures == []

    def stop_and_check(self, brokers: list[str]) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(90)
        assert self.failures == []
        for writer in self.writers:
            writer.close()
            payloads = read_segment(brokers, writer.segment)
            expected = [writer.payload(n) for n in range(writer.acknowledged + 1)]
            # Exactly once, in order: an event resent after a failover may have
            # been stored once before (then AppendSetup said so), never twice.
            assert payloads == expected, (writer.segment, len(payloads), len(expected))


def _raw_appender(channel: grpc.Channel) -> Callable[[int], str | None]:
    """``append(number)``: SetupAppend on orders/0 as writer "w", one block; the last reply kind."""
    stub = append_pb2_grpc.AppendStub(channel)

    def append(number: int) -> str | None:
        block = events_pb2.EventBlock(format_version=1, payloads=[b"%d" % number])
        replies = stub.Append(iter([
            append_pb2.AppendCommand(request_id=1 << 32, setup_append=append_pb2.SetupAppend(
                segment="orders/0", writer_id="w")),
            append_pb2.AppendCommand(request_id=(1 << 32) | 1, append_block=append_pb2.AppendBlock(
                data=block.SerializeToString(), event_count=1, last_event_number=number,
                end=True))]), timeout=30)
        return [reply.WhichOneof("reply") for reply in replies][-1]

    return append


def _create_topic_named(address: str, name: str, segments: int) -> None:
    with folio.Client(address, timeout_s=30) as client:
        client.create_topic(name, segments)


def _create_topic(address: str) -> None:
    _create_topic_named(address, "orders", SEGMENTS)


@pytest.mark.timeout(300)
def test_sigkill_of_an_owner_moves_its_segments_and_loses_nothing(
        zk_url: str, bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    _, brokers = _cluster(bookie_processes, zk_url, tmp_path)
    addresses = [b.address for b in brokers]
    _create_topic(addresses[0])
    writers = Writers(addresses, "orders")
    writers.advance(20, "20 events per segment")
    victim_address = lookup_owner(addresses, "orders/0")
    victim = next(b for b in brokers if b.address == victim_address)
    victim.kill()
    survivors = [a for a in addresses if a != victim_address]
    writers.advance(30, "30 more events per segment after the SIGKILL")
    assert lookup_owner(survivors, "orders/0") in survivors
    # The writer of orders/0 went on on another broker.
    assert writers.writers[0].owners_seen[0] == victim_address
    assert writers.writers[0].owners_seen[-1] in survivors
    _spread(survivors[0], [COUNT // 2] * 2)
    writers.stop_and_check(survivors)


@pytest.mark.timeout(300)
def test_split_brain_a_stopped_owner_acknowledges_nothing_after_takeover(
        zk_url: str, bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    _, brokers = _cluster(bookie_processes, zk_url, tmp_path)
    addresses = [b.address for b in brokers]
    _create_topic(addresses[0])
    writers = Writers(addresses, "orders")
    writers.advance(20, "20 events per segment")
    stale_address = lookup_owner(addresses, "orders/0")
    stale = next(b for b in brokers if b.address == stale_address)
    # A raw stream bound to the segment on the owner before it stops.
    channel = grpc.insecure_channel(stale_address)
    commands: list[append_pb2.AppendCommand] = [append_pb2.AppendCommand(
        request_id=1 << 32, setup_append=append_pb2.SetupAppend(
            segment="orders/0", writer_id="zombie"))]
    gate = threading.Event()

    def command_stream() -> Iterator[append_pb2.AppendCommand]:
        yield commands[0]
        gate.wait(120)
        yield commands[1]

    # iter(): the call is its own iterator; grpc-stubs gives CallIterator only __iter__.
    replies = iter(append_pb2_grpc.AppendStub(channel).Append(command_stream(), timeout=120))
    assert next(replies).WhichOneof("reply") == "append_setup"
    stale.process.send_signal(signal.SIGSTOP)
    try:
        others = [a for a in addresses if a != stale_address]
        # Past its session timeout, another broker takes the segment and the writers go on.
        wait_for(lambda: lookup_owner(others, "orders/0") != stale_address,
                 "another broker owns orders/0", timeout_s=60)
        writers.advance(20, "20 more events per segment while the old owner is stopped")
    finally:
        stale.process.send_signal(signal.SIGCONT)
    # The old owner wakes up with a stream bound to the segment: its append is refused.
    block = events_pb2.EventBlock(format_version=1, payloads=[b"zombie"])
    commands.append(append_pb2.AppendCommand(
        request_id=(1 << 32) | 1, append_block=append_pb2.AppendBlock(
            data=block.SerializeToString(), event_count=1, last_event_number=0, end=True)))
    gate.set()
    try:
        reply = next(replies)
        # WrongHost once it has seen its session end or a bookie's fence; before that
        # (its bookie calls of before the stop time out first) a retriable failure.
        # Never an acknowledgement.
        assert reply.WhichOneof("reply") in ("wrong_host", "append_failed"), reply
        if reply.WhichOneof("reply") == "append_failed":
            assert reply.append_failed.retriable, reply
    except grpc.RpcError as error:  # or the stream ends, UNAVAILABLE: nothing acknowledged
        assert error.code() == grpc.StatusCode.UNAVAILABLE, error
    channel.close()
    writers.advance(10, "10 more events per segment after the old owner woke up")
    writers.stop_and_check(others)
    assert b"zombie" not in read_segment(others, "orders/0")


@pytest.mark.timeout(300)
def test_graceful_handover_when_a_broker_joins_and_when_one_stops(
        zk_url: str, bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    cluster, brokers = _cluster(bookie_processes, zk_url, tmp_path)
    addresses = [b.address for b in brokers]
    _create_topic(addresses[0])
    writers = Writers(addresses, "orders")
    writers.advance(20, "20 events per segment")
    fourth = cluster.start_broker()
    addresses.append(fourth.address)
    for writer in writers.writers:
        writer.brokers.append(fourth.address)
    _spread(addresses[0], [3, 3, 3, 3])
    writers.advance(20, "20 more events per segment after the join")
    # SIGTERM: the broker hands its containers over before it exits.
    leaving = brokers[0]
    assert leaving.terminate() == 0
    remaining = addresses[1:]
    _spread(remaining[0], [4, 4, 4])
    writers.advance(20, "20 more events per segment after the leave")
    writers.stop_and_check(remaining)


def _two_brokers_and_an_appender_on_the_owner(
        bookie_processes: BookieProcesses, zk_url: str, tmp_path: Path,
) -> tuple[list[str], str, grpc.Channel, Callable[[int], str | None]]:
    """Two brokers, topic ``orders``: their addresses, the one not owning ``orders/0``,
    and a raw appender (with its channel) on ``orders/0``'s owner."""
    _, brokers = _cluster(bookie_processes, zk_url, tmp_path, brokers=2)
    addresses = [b.address for b in brokers]
    _create_topic(addresses[0])
    owner = lookup_owner(addresses, "orders/0")
    other = next(a for a in addresses if a != owner)
    channel = grpc.insecure_channel(owner)
    return addresses, other, channel, _raw_appender(channel)


@pytest.mark.timeout(300)
def test_a_topic_deleted_on_another_broker_takes_no_more_appends_on_its_owner(
        zk_url: str, bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    _, other, channel, append = _two_brokers_and_an_appender_on_the_owner(
        bookie_processes, zk_url, tmp_path)

    assert append(0) == "data_appended"
    with folio.Client(other, timeout_s=30) as client:
        client.delete_topic("orders")
    # The owner's loaded segment meets the fence and finds its record gone.
    assert append(1) in ("no_such_segment", "wrong_host")
    assert append(1) == "no_such_segment"
    channel.close()


@pytest.mark.timeout(300)
def test_a_scale_on_another_broker_seals_the_owner_s_segment(
        zk_url: str, bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    addresses, other, channel, append = _two_brokers_and_an_appender_on_the_owner(
        bookie_processes, zk_url, tmp_path)
    assert append(0) == "data_appended"
    with folio.Client(other, timeout_s=30) as client:
        low, high = next((s.key_low, s.key_high) for s in client.get_topic("orders").segments
                         if s.name == "orders/0")
        client.scale_topic("orders", ["orders/0"], [(low, (low + high) / 2),
                                                    ((low + high) / 2, high)])
    # The owner's copy met the fence (or the record's change) and loads it again, sealed.
    assert append(1) in ("segment_is_sealed", "wrong_host")
    assert append(1) == "segment_is_sealed"
    channel.close()
    assert read_segment(addresses, "orders/0") == [b"0"]


@pytest.mark.timeout(300)
def test_unary_calls_and_reads_on_a_non_owner_are_wrong_host_with_the_owner(
        zk_url: str, bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    _, brokers = _cluster(bookie_processes, zk_url, tmp_path, brokers=2)
    addresses = [b.address for b in brokers]
    _create_topic(addresses[0])
    owner = lookup_owner(addresses, "orders/0")
    other = next(a for a in addresses if a != owner)
    with grpc.insecure_channel(other) as channel:
        calls: dict[str, Callable[[], object]] = {
            "GetSegmentInfo": lambda: admin_pb2_grpc.AdminStub(channel).GetSegmentInfo(
                admin_pb2.GetSegmentInfoRequest(segment="orders/0"), timeout=10),
            "Read": lambda: list(read_pb2_grpc.ReadStub(channel).Read(
                read_pb2.ReadRequest(segment="orders/0", max_wait_ms=1), timeout=10)),
        }
        for name, call in calls.items():
            with pytest.raises(grpc.RpcError) as refused:
                call()
            error = refused.value
            assert error.code() == grpc.StatusCode.UNAVAILABLE, name
            trailers = trailers_of(error)
            assert trailers["folio-error-code"] == str(errors_pb2.ERROR_CODE_WRONG_HOST), name
            assert json.loads(trailers["folio-error-context"]) == {
                "segment": "orders/0", "owner": owner}, name
