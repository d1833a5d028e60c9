"""A broker that gave its containers up while ZooKeeper was down, with its session alive.

ZooKeeper is stopped for longer than the broker's session timeout: the
broker pauses its writes at once and, once the timeout passed, stops
serving its containers (it cannot know whether its session survived). A
restarted ZooKeeper gives every session its full timeout again, so the
broker's session and ownership nodes are still there: it serves the same
containers again. Serving them again is a take-over: the transaction
coordinator, stood down with its container, is seated again, so
transactions work through this broker afterwards (a regression: the nemesis
saw ``begin`` answered WrongHost naming the broker itself, for ever).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

import folio
from tests.cluster.test_cluster_broker import _start_cluster, ownership_phase
from tests.support.bookies import BookieProcesses
from tests.support.wait import wait_for
from tests.support.zookeeper import ZooKeeperServer, make_chroot


@pytest.mark.timeout(300)
def test_containers_served_again_after_a_long_zookeeper_outage_seat_the_coordinator(
        make_zookeeper: Callable[[], ZooKeeperServer], bookie_processes: BookieProcesses,
        tmp_path: Path) -> None:
    server = make_zookeeper()
    url = make_chroot(server)
    _, broker = _start_cluster(bookie_processes, url, tmp_path,
                               broker_session_timeout_ms=4_000)
    with folio.Client(broker.address, timeout_s=60) as client:
        client.create_topic("resume", 1)
        with client.transactional_writer("resume") as writer, writer.begin() as txn:
            txn.write_event(b"before", routing_key="k")
        server.kill()
        wait_for(lambda: ownership_phase(broker) == "stopped",
                 "the broker gives its containers up past the session timeout", 60)
        server.start()
        wait_for(lambda: ownership_phase(broker) == "serving",
                 "the broker serves its containers again (same session)", 60)
        # The path under test: the same session, the containers served again.
        assert "serving container" in broker.log(), broker.log()[-3000:]
        # The coordinator is seated once its container is taken over again;
        # until then begin may be WrongHost (retriable): it must work within
        # the deadline (without the fix it never does).
        with client.transactional_writer("resume") as writer:
            began: list[folio.Transaction[bytes]] = []

            def begin() -> bool:
                try:
                    began.append(writer.begin())
                except folio.WrongHostError:
                    return False
                return True

            wait_for(begin, "a transaction begins on the resumed coordinator", 60)
            with began[0] as txn:
                txn.write_event(b"after", routing_key="k")
        assert txn.status() == "COMMITTED"
        with client.reader("resume") as reader:
            got = [reader.read_next(timeout=60) for _ in range(2)]
        assert [e.payload for e in got if e is not None] == [b"before", b"after"]
