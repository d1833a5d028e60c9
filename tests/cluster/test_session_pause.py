"""A broker cut off from ZooKeeper pauses its writes at once and resumes within its session.

Real ZooKeeper, 3 real bookies, a real ``folio broker`` whose metadata URL goes
through a ``TcpProxy``, so that its connection alone is cut (the test's own
ZooKeeper client and the bookies' are not). While the connection is gone the
broker refuses every new write with a retriable WrongHost without owner
saying why, serves reads, and keeps its containers; once
the proxy relays again within the session, the writers go on: nothing lost
or doubled, the same ownership nodes (same session), the same open ledgers
(no recovery, no new ledger).
"""

from __future__ import annotations

import threading
from pathlib import Path

import grpc
import pytest

import folio
from broker.cluster.containers import container_of, owner_path
from folio.api.v1 import (
    admin_pb2,
    admin_pb2_grpc,
    append_pb2,
    append_pb2_grpc,
    read_pb2,
    read_pb2_grpc,
)
from folio.api.v1.errors_pb2 import ErrorCode
from tests.cluster.test_cluster_broker import _read_exactly, ownership_phase
from tests.support.bookies import BookieProcesses
from tests.support.cluster import LocalCluster
from tests.support.proxy import TcpProxy
from tests.support.wait import wait_for
from tests.support.zookeeper import ZooKeeperServer, zk_client

#: Long enough that the cut never outlasts the session on a loaded machine.
SESSION_TIMEOUT_MS = 20_000
COUNT = 16
SEGMENTS = ("load/0", "load/1")


def _setup_reply(address: str, segment: str) -> append_pb2.AppendReply:
    with grpc.insecure_channel(address) as channel:
        replies = append_pb2_grpc.AppendStub(channel).Append(iter([
            append_pb2.AppendCommand(request_id=1 << 32, setup_append=append_pb2.SetupAppend(
                segment=segment, writer_id="probe"))]), timeout=30)
        return next(iter(replies))


def _first_read(address: str, segment: str) -> read_pb2.ReadResponse:
    with grpc.insecure_channel(address) as channel:
        call = read_pb2_grpc.ReadStub(channel).Read(read_pb2.ReadRequest(
            segment=segment, offset=0, max_bytes=65536, max_wait_ms=0), timeout=30)
        try:
            return next(iter(call))
        finally:
            call.cancel()


def _ownership(zk_address: str, chroot: str) -> dict[int, tuple[int, int]]:
    """Each container of ``SEGMENTS``: its owner node's (creation zxid, session)."""
    zk = zk_client(zk_address + chroot)
    try:
        found: dict[int, tuple[int, int]] = {}
        for segment in SEGMENTS:
            container = container_of(segment, COUNT)
            stat = zk.exists(owner_path(container))
            assert stat is not None, f"container {container} has no owner"
            found[container] = (stat.czxid, stat.ephemeralOwner)
        return found
    finally:
        zk.stop()
        zk.close()


def _ledgers(client: folio.Client) -> dict[str, list[tuple[int, bool]]]:
    return {segment: [(ledger.ledger_id, ledger.closed)
                      for ledger in client.get_segment_info(segment).ledgers]
            for segment in SEGMENTS}


@pytest.mark.timeout(300)
def test_a_broker_cut_from_zookeeper_refuses_writes_and_resumes_within_its_session(
        zookeeper: ZooKeeperServer, zk_url: str, bookie_processes: BookieProcesses,
        tmp_path: Path) -> None:
    chroot = zk_url.removeprefix(f"zk://{zookeeper.address}")
    cluster = LocalCluster(bookie_processes, zk_url, tmp_path)
    cluster.init(container_count=COUNT, ensemble_size=3, write_quorum=2, ack_quorum=2)
    for _ in range(3):
        cluster.start_bookie()
    host, port = zookeeper.address.rsplit(":", 1)
    with TcpProxy(host, int(port)) as proxy:
        proxied = LocalCluster(bookie_processes, f"zk://{proxy.address}{chroot}", tmp_path)
        broker = proxied.start_broker(session_timeout_ms=SESSION_TIMEOUT_MS)
        acknowledged: list[int] = []
        failures: list[BaseException] = []
        stop = threading.Event()

        def write(client: folio.Client) -> None:
            number = 0
            try:
                with client.writer("load", linger_ms=1) as writer:
                    while not stop.is_set():
                        writer.write_event(b"%d" % number, f"k{number % 7}").result(timeout=120)
                        acknowledged.append(number)
                        number += 1
            except BaseException as error:  # reported by the test below
                failures.append(error)

        with folio.Client(broker.address, timeout_s=30) as client:
            client.create_topic("load", 2)
            writer_thread = threading.Thread(target=write, args=(client,))
            writer_thread.start()
            try:
                wait_for(lambda: len(acknowledged) >= 50 or bool(failures), "50 appends")
                owners_before = _ownership(zookeeper.address, chroot)
                ledgers_before = _ledgers(client)
                assert ownership_phase(broker) == "serving"
                # A second writer, its flow bound before the cut (writers are made
                # from metadata, which needs ZooKeeper).
                late_writer = client.writer("load")
                late_writer.write_event(b"early", "late-key").result(timeout=60)

                proxy.pause()  # no reconnection gets through...
                proxy.cut()    # ...and the live connection is reset: SUSPENDED
                wait_for(lambda: ownership_phase(broker) == "paused",
                         "the broker paused its writes")
                # Its next block, on a stream bound before, is refused until the
                # session is back.
                late = late_writer.write_event(b"late", "late-key")
                # SetupAppend: WrongHost without owner (look it up, retry).
                reply = _setup_reply(broker.address, SEGMENTS[0])
                assert reply.WhichOneof("reply") == "wrong_host"
                assert (reply.wrong_host.segment, reply.wrong_host.owner) == (SEGMENTS[0], "")
                # A unary write: UNAVAILABLE, error code WRONG_HOST, a clear message.
                with grpc.insecure_channel(broker.address) as channel, \
                        pytest.raises(grpc.RpcError) as refused:
                    admin_pb2_grpc.AdminStub(channel).TruncateSegment(
                        admin_pb2.TruncateSegmentRequest(segment=SEGMENTS[1], offset=0),
                        timeout=30)
                assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
                trailers = dict(refused.value.trailing_metadata() or ())
                assert trailers["folio-error-code"] == str(ErrorCode.ERROR_CODE_WRONG_HOST)
                assert trailers["folio-error"] == "WrongHostError"
                assert "lost its metadata-store connection; retry" in (
                    refused.value.details() or "")
                # Reads of what was acknowledged go on.
                assert _first_read(broker.address, SEGMENTS[0]).blocks
                # Refused, never acknowledged, while paused.
                assert not late.done()
                assert ownership_phase(broker) == "paused"  # (still within the session)

                proxy.resume()
                wait_for(lambda: ownership_phase(broker) == "serving", "the broker serving again")
                assert late.result(timeout=120).offset >= 0
                late_writer.close()
                count = len(acknowledged)
                wait_for(lambda: len(acknowledged) >= count + 50 or bool(failures),
                         "50 appends after the reconnection")
            finally:
                stop.set()
                writer_thread.join(120)
            assert not writer_thread.is_alive()
            assert failures == []
            # Same session, same ownership nodes; same ledgers, still open: no recovery.
            assert _ownership(zookeeper.address, chroot) == owners_before
            ledgers_after = _ledgers(client)
            for segment in SEGMENTS:
                assert ledgers_after[segment] == ledgers_before[segment], segment
                assert not ledgers_after[segment][-1][1], f"{segment}'s ledger was closed"
            events = _read_exactly(client, "load", len(acknowledged) + 2)
            payloads = sorted(event.payload for event in events)
            assert payloads == sorted([b"early", b"late", *(b"%d" % n for n in acknowledged)])
        log = broker.log()
        assert "writes paused, containers kept" in log
        assert "writes resumed, nothing reloaded" in log
        assert "stopped serving containers" not in log
        assert broker.running()
