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
from tests.support.bookies import BookieProcess, BookieProcesses
from tests.support.cluster import LocalCluster
from tests.support.proxy import TcpProxy
from tests.support.trailers import trailers as trailers_of
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
            call.cancel()  # type: ignore[no-untyped-call]  # grpc-stubs: cancel() unannotated


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


class _Load:
    """One writer thread appending numbered events to ``load`` until stopped."""

    def __init__(self, client: folio.Client) -> None:
        self.acknowledged: list[int] = []
        self.failures: list[BaseException] = []
        self._client = client
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._write)

    def _write(self) -> None:
        number = 0
        try:
            with self._client.writer("load", linger_ms=1) as writer:
                while not self._stop.is_set():
                    writer.write_event(b"%d" % number, f"k{number % 7}").result(timeout=120)
                    self.acknowledged.append(number)
                    number += 1
        except BaseException as error:  # reported by the test
            self.failures.append(error)

    def start(self) -> None:
        self._thread.start()

    def wait_more(self, count: int, what: str) -> None:
        """Wait for ``count`` more acknowledgements (or a failure)."""
        target = len(self.acknowledged) + count
        wait_for(lambda: len(self.acknowledged) >= target or bool(self.failures), what)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(120)
        assert not self._thread.is_alive()
        assert self.failures == []


def _proxied_broker(bookie_processes: BookieProcesses, zookeeper: ZooKeeperServer,
                    zk_url: str, base: Path, proxy: TcpProxy,
                    session_timeout_ms: int) -> BookieProcess:
    """Cluster init and 3 bookies on ``zk_url``; one broker reaching ZooKeeper via ``proxy``."""
    cluster = LocalCluster(bookie_processes, zk_url, base)
    cluster.init(container_count=COUNT, ensemble_size=3, write_quorum=2, ack_quorum=2)
    for _ in range(3):
        cluster.start_bookie()
    chroot = zk_url.removeprefix(f"zk://{zookeeper.address}")
    proxied = LocalCluster(bookie_processes, f"zk://{proxy.address}{chroot}", base)
    return proxied.start_broker(session_timeout_ms=session_timeout_ms)


def _proxy_for(zookeeper: ZooKeeperServer) -> TcpProxy:
    host, port = zookeeper.address.rsplit(":", 1)
    return TcpProxy(host, int(port))


@pytest.mark.timeout(300)
def test_a_broker_cut_from_zookeeper_refuses_writes_and_resumes_within_its_session(
        zookeeper: ZooKeeperServer, zk_url: str, bookie_processes: BookieProcesses,
        tmp_path: Path) -> None:
    chroot = zk_url.removeprefix(f"zk://{zookeeper.address}")
    with _proxy_for(zookeeper) as proxy:
        broker = _proxied_broker(bookie_processes, zookeeper, zk_url, tmp_path, proxy,
                                 SESSION_TIMEOUT_MS)
        with folio.Client(broker.address, timeout_s=30) as client:
            client.create_topic("load", 2)
            load = _Load(client)
            load.start()
            try:
                load.wait_more(50, "50 appends")
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
                trailers = trailers_of(refused.value)
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
                load.wait_more(50, "50 appends after the reconnection")
            finally:
                load.stop()
            # Same session, same ownership nodes; same ledgers, still open: no recovery.
            assert _ownership(zookeeper.address, chroot) == owners_before
            ledgers_after = _ledgers(client)
            for segment in SEGMENTS:
                assert ledgers_after[segment] == ledgers_before[segment], segment
                assert not ledgers_after[segment][-1][1], f"{segment}'s ledger was closed"
            events = _read_exactly(client, "load", len(load.acknowledged) + 2)
            payloads = sorted(event.payload for event in events)
            assert payloads == sorted(
                [b"early", b"late", *(b"%d" % n for n in load.acknowledged)])
        log = broker.log()
        assert "writes paused, containers kept" in log
        assert "writes resumed, nothing reloaded" in log
        assert "stopped serving containers" not in log
        assert broker.running()


@pytest.mark.timeout(300)
def test_a_broker_cut_past_its_session_timeout_gives_its_containers_up_then_recovers(
        zookeeper: ZooKeeperServer, zk_url: str, bookie_processes: BookieProcesses,
        tmp_path: Path) -> None:
    with _proxy_for(zookeeper) as proxy:
        broker = _proxied_broker(bookie_processes, zookeeper, zk_url, tmp_path, proxy, 3_000)
        with folio.Client(broker.address, timeout_s=30) as client:
            client.create_topic("load", 2)
            load = _Load(client)
            load.start()
            try:
                load.wait_more(50, "50 appends")
                ledgers_before = _ledgers(client)
                proxy.pause()
                proxy.cut()
                wait_for(lambda: ownership_phase(broker) in ("paused", "stopped"),
                         "the broker paused its writes")
                # Still cut off once the session timeout has passed: the session
                # has surely expired; the broker gives its containers up.
                wait_for(lambda: ownership_phase(broker) == "stopped",
                         "the broker gave its containers up", timeout_s=60)
                proxy.resume()
                wait_for(lambda: ownership_phase(broker) == "serving", "the broker serving again",
                         timeout_s=60)
                load.wait_more(50, "50 appends after the broker came back")
            finally:
                load.stop()
            # The segments were loaded afresh: recovery closed the old ledger (fenced)
            # and each went on in a new one.
            ledgers_after = _ledgers(client)
            for segment in SEGMENTS:
                before, after = ledgers_before[segment], ledgers_after[segment]
                assert len(after) > len(before), (segment, before, after)
                assert after[len(before) - 1] == (before[-1][0], True), (segment, after)
            events = _read_exactly(client, "load", len(load.acknowledged))
            assert sorted(event.payload for event in events) == sorted(
                b"%d" % n for n in load.acknowledged)
        log = broker.log()
        assert "stayed lost for the session timeout: containers given up" in log
        assert broker.running()
