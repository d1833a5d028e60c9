"""``folio broker --metadata-url``: a broker on ZooKeeper and 3 bookies (E=3, Qw=2, Qa=2).

Real ZooKeeper, real ``folio bookie`` and ``folio broker`` processes, the SDK.
The broker keeps nothing on its disk: killed and replaced by a new process, the
new one serves every topic and event. ZooKeeper itself may go away and come
back under load: the broker pauses its writes while its connection is gone
(the writers' SDK retries them) and resumes within its session; none is lost
or doubled.
"""

from __future__ import annotations

import re
import threading
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import folio
from ledger.metadata.ledger_metadata import LedgerMetadata
from tests.support.bookies import BookieProcess, BookieProcesses
from tests.support.cluster import LocalCluster
from tests.support.wait import wait_for
from tests.support.zookeeper import ZooKeeperServer, make_chroot, zk_client


def _read_exactly(client: folio.Client, topic: str, count: int,
                  timeout_s: float = 60.0) -> list[folio.Event[Any]]:
    events: list[folio.Event[Any]] = []
    with client.reader(topic) as reader:
        def more() -> bool:
            event = reader.read_next(timeout=0.5)
            if event is not None:
                events.append(event)
            return len(events) >= count

        wait_for(more, f"{count} events of {topic} (got {len(events)})", timeout_s)
        assert reader.read_next(timeout=0.5) is None, "more events than were written"
    return events


def ownership_phase(broker: BookieProcess) -> str:
    """The broker's ``folio_broker_ownership_phase`` now: serving, paused or stopped."""
    url = re.search(r"metrics on (http://\S+/metrics)", broker.ready_line)
    assert url is not None, broker.ready_line
    with urllib.request.urlopen(url.group(1), timeout=10) as response:
        text = response.read().decode()
    now = re.findall(r'^folio_broker_ownership_phase\{phase="(\w+)"\} 1\.0$', text,
                     re.MULTILINE)
    return now[0] if len(now) == 1 else f"unknown: {now}"


def _start_cluster(processes: BookieProcesses, url: str, base: Path,
                   broker_session_timeout_ms: int = 2_000) -> tuple[LocalCluster, BookieProcess]:
    cluster = LocalCluster(processes, url, base)
    cluster.init(ensemble_size=3, write_quorum=2, ack_quorum=2)
    for _ in range(3):
        cluster.start_bookie()
    broker = cluster.start_broker("--data-dir", str(base / "unused-data-dir"),
                                  session_timeout_ms=broker_session_timeout_ms)
    assert "E=3 Qw=2 Qa=2" in broker.ready_line
    return cluster, broker


# Several processes start one after another: more than the default 120 s on a
# loaded machine.
@pytest.mark.timeout(300)
def test_broker_on_zookeeper_serves_and_a_new_process_finds_everything(
        zookeeper: ZooKeeperServer, zk_url: str, bookie_processes: BookieProcesses,
        tmp_path: Path) -> None:
    cluster, broker = _start_cluster(bookie_processes, zk_url, tmp_path)
    with folio.Client(broker.address, timeout_s=30) as client:
        client.create_topic("orders", 3)
        with client.writer("orders", folio.StringSerializer()) as writer:
            futures = [writer.write_event(f"e{i}", f"key-{i % 10}") for i in range(300)]
            writer.flush(timeout=30)
        assert all(future.result(timeout=0).offset >= 0 for future in futures)
        assert len(_read_exactly(client, "orders", 300)) == 300
    # Metadata is in ZooKeeper: the ledgers, each on 3 of the registered bookies.
    bookie_ids = {b.address for b in bookie_processes.started if "bookie" in str(b.data_dir)}
    chroot = zk_url.removeprefix(f"zk://{zookeeper.address}")
    zk = zk_client(zookeeper.address + chroot)
    try:
        ledger_nodes = [name for name in zk.get_children("/ledgers") if name.startswith("L")]
        assert ledger_nodes
        for name in ledger_nodes:
            metadata = LedgerMetadata.from_bytes(zk.get(f"/ledgers/{name}")[0])
            assert (metadata.ensemble_size, metadata.write_quorum, metadata.ack_quorum) == (
                3, 2, 2)
            assert set(metadata.ensembles[0][1]) == bookie_ids
        assert zk.get_children("/brokers") == [broker.address]
        # Nothing on the broker's disk: its --data-dir was never even created.
        assert not (tmp_path / "unused-data-dir").exists()
        broker.kill()
        # The dead broker's registration vanishes with its session.
        wait_for(lambda: zk.get_children("/brokers") == [],
                 "the SIGKILLed broker's registration vanished", timeout_s=60)
        replacement = cluster.start_broker()
        assert zk.get_children("/brokers") == [replacement.address]
        assert replacement.terminate() == 0
        # A clean stop unregisters (first thing on SIGTERM).
        assert zk.get_children("/brokers") == []
    finally:
        zk.stop()
        zk.close()
    replacement = cluster.start_broker()
    with folio.Client(replacement.address, timeout_s=30) as client:
        assert [t.name for t in client.list_topics()] == ["orders"]
        events = _read_exactly(client, "orders", 300)
        assert sorted(int(e.payload[1:]) for e in events) == list(range(300))
        with client.writer("orders") as writer:
            writer.write_event(b"after restart", "key-1").result(timeout=30)
        assert len(_read_exactly(client, "orders", 301)) == 301


# Several processes start one after another: more than the default 120 s on a
# loaded machine.
@pytest.mark.timeout(300)
def test_zookeeper_down_and_restarted_under_load_loses_nothing(
        make_zookeeper: Callable[[], ZooKeeperServer], bookie_processes: BookieProcesses,
        tmp_path: Path) -> None:
    server = make_zookeeper()
    url = make_chroot(server)
    # Sessions outlive the outage (a restarted server gives each session its full
    # timeout again), so the registrations and the broker stay as they were.
    cluster, broker = _start_cluster(bookie_processes, url, tmp_path,
                                     broker_session_timeout_ms=10_000)
    acknowledged: list[int] = []
    failures: list[BaseException] = []
    phase = {"name": "before"}
    written_in: dict[str, int] = {}
    stop = threading.Event()

    def write(client: folio.Client) -> None:
        number = 0
        try:
            with client.writer("load", linger_ms=1) as writer:
                while not stop.is_set():
                    writer.write_event(b"%d" % number, f"k{number % 7}").result(timeout=60)
                    acknowledged.append(number)
                    written_in[phase["name"]] = written_in.get(phase["name"], 0) + 1
                    number += 1
        except BaseException as error:  # reported by the test below
            failures.append(error)

    with folio.Client(broker.address, timeout_s=30) as client:
        client.create_topic("load", 2)
        writer_thread = threading.Thread(target=write, args=(client,))
        writer_thread.start()
        try:
            wait_for(lambda: len(acknowledged) >= 50 or bool(failures), "50 appends before")
            phase["name"] = "down"
            server.stop()
            # The broker pauses its writes at once (it cannot know whether its
            # session outlives the outage): the writer's events wait, retried
            # by the SDK, with nothing unloaded (docs/cluster.md, "Session loss").
            wait_for(lambda: ownership_phase(broker) == "paused" or bool(failures),
                     "the broker paused its writes")
            server.start()
            phase["name"] = "after"
            count = len(acknowledged)
            wait_for(lambda: len(acknowledged) >= count + 50 or bool(failures),
                     "50 appends after ZooKeeper came back")
        finally:
            stop.set()
            writer_thread.join(60)
        assert not writer_thread.is_alive()
        assert failures == []
        assert written_in["after"] >= 50
        log = broker.log()
        if "containers given up" not in log:  # (ZooKeeper back within the session timeout)
            assert "writes resumed, nothing reloaded" in log
        # The broker is registered (in the same session, or again in a new one should
        # the old one have expired while it reconnected) and serves metadata calls again.
        zk = zk_client(server.address + url.removeprefix(f"zk://{server.address}"))
        try:
            wait_for(lambda: zk.get_children("/brokers") == [broker.address],
                     "the broker registered", timeout_s=60)
        finally:
            zk.stop()
            zk.close()
        # Metadata calls work again once the broker's session reconnected; until
        # then they fail as retriable (UNAVAILABLE), as a client sees them.
        def created() -> bool:
            try:
                client.create_topic("after-outage")
            except folio.FolioUnavailableError:
                return False
            except folio.TopicExistsError:
                pass  # created by an attempt whose answer was lost
            return True

        wait_for(created, "a topic created once ZooKeeper is back", timeout_s=60)
        events = _read_exactly(client, "load", len(acknowledged))
        assert sorted(int(event.payload) for event in events) == sorted(acknowledged)
    assert broker.running()
    assert cluster.url == url
