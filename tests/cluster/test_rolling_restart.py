"""A rolling restart of every broker, then every bookie, under load, with real processes.

ZooKeeper, 3 bookies (E=3 Qw=2 Qa=2), 3 brokers (2 s sessions, 12
containers). SDK writers write keyed events continuously
(``tests/support/cluster_load.py``) and a reader group member (a process of
its own) reads. Each broker in turn is stopped with SIGTERM (it hands its
containers over), started again on the same address and waited for until it
owns its share of containers again (ListBrokers); then each bookie in turn is
stopped with SIGTERM and started again on the same address and data (its
ready line comes once it is registered). The writers must go on through all
of it without an error reaching them, and at the end every acknowledged event
was read once, in per-key order.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

import folio
from bench._cluster_client import list_brokers
from tests.support.bookies import BookieProcesses
from tests.support.cluster_load import (
    COUNT,
    KeyedWriters,
    check_read_once,
    segment_ends,
    start_cluster,
    wait_read_to_ends,
    wait_spread,
)
from tests.support.member_process import MemberProcess
from tests.support.wait import wait_for


@pytest.mark.timeout(300)
def test_a_rolling_restart_of_every_broker_and_bookie_loses_and_doubles_nothing(
        zk_url: str, bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    cluster, brokers = start_cluster(bookie_processes, zk_url, tmp_path)
    bookies = [p for p in bookie_processes.started if p not in brokers]
    assert len(bookies) == 3
    addresses = [b.address for b in brokers]
    endpoint = ",".join(addresses)
    with folio.Client(endpoint, timeout_s=30) as client:
        client.create_topic("roll", 6)
        client.reader_group("g-roll", ["roll"], "earliest", session_timeout_ms=6000)
    reader = MemberProcess(tmp_path, endpoint, "g-roll", "roll", "r0", 6000)
    writers = KeyedWriters(endpoint, "roll")
    try:
        writers.advance(20, "20 events per writer")
        for index, broker in enumerate(brokers):
            assert broker.terminate() == 0, broker.log()
            others = [a for a in addresses if a != broker.address]
            wait_spread(others[0], [COUNT // 2] * 2)
            writers.advance(20, f"20 more events per writer with broker {index} stopped")
            again = cluster.start_broker("--port", str(broker.port), name=f"broker-{index}-again")
            assert again.address == broker.address
            wait_spread(again.address, [COUNT // 3] * 3)
            assert any(b.address == again.address and b.containers
                       for b in list_brokers(again.address).brokers)
            writers.advance(20, f"20 more events per writer after broker {index} restarted")
        for index, bookie in enumerate(bookies):
            assert bookie.terminate() == 0, bookie.log()
            again = cluster.start_bookie("--port", str(bookie.port), data_dir=bookie.data_dir)
            assert again.address == bookie.address
            writers.advance(20, f"20 more events per writer after bookie {index} restarted")
        acked = writers.stop()
        wait_for(lambda: acked <= set(reader.events()), "the reader read every event", 90)
        ends = segment_ends(endpoint, "roll")
        wait_read_to_ends(lambda: [reader.reads()], ends)
        check_read_once(acked, [reader.reads()], ends)
        assert "rejoining" not in reader.log(), reader.log()
        assert reader.stop(signal.SIGTERM) == 0, reader.log()
    finally:
        writers.stop_writing()
        reader.reap()
