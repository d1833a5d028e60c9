"""SDK writers and a reader group under load across broker failures, with real processes.

ZooKeeper, 3 bookies (E=3 Qw=2 Qa=2), 3 brokers (2 s sessions, 12
containers). Writers are SDK writers (exactly-once) on threads writing keyed
events (``tests/support/cluster_load.py``); the group's members are processes
of their own (``tests/support/member_process.py``) that print each event with
its segment and offset. At the end every acknowledged event was read by the
group exactly once (each offset once; a member SIGKILLed may have its
unreported reads read again by its successor, from the position it
reported), in per-key order.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
from kazoo.client import KazooClient

import folio
from broker.groups.heartbeats import HEARTBEATS_ROOT
from tests.support.bookies import BookieProcesses
from tests.support.cluster_load import (
    COUNT,
    KeyedWriters,
    check_read_once,
    container_owner,
    segment_ends,
    segment_owners,
    start_cluster,
    wait_read_to_ends,
    wait_spread,
)
from tests.support.member_process import MemberProcess
from tests.support.wait import wait_for
from tests.support.zookeeper import ZooKeeperServer, zk_client

SEGMENTS = 6


def _members_read_all(members: list[MemberProcess], acked: set[str]) -> None:
    def read_all() -> bool:
        return acked <= {e for m in members for e in m.events()}

    wait_for(read_all, "the group read every acknowledged event", 90)


@pytest.mark.timeout(300)
def test_writers_and_a_group_lose_and_double_nothing_when_the_busiest_owner_is_killed(
        zk_url: str, bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    _, brokers = start_cluster(bookie_processes, zk_url, tmp_path)
    addresses = [b.address for b in brokers]
    endpoint = ",".join(addresses)
    with folio.Client(endpoint, timeout_s=30) as client:
        client.create_topic("load", SEGMENTS)
        # The victim: the broker owning the most segments (all equally busy).
        owners = segment_owners(addresses, "load", SEGMENTS)
        victim_address = max(addresses, key=lambda a: list(owners.values()).count(a))
        busy = sorted(s for s, owner in owners.items() if owner == victim_address)
        assert busy
        survivors = [a for a in addresses if a != victim_address]
        # A long group session: only a crash may free a member's segments here.
        group = client.reader_group("g-load", ["load"], "earliest", session_timeout_ms=6000)
        # The victim first: the members' admin broker (their heartbeats) too.
        members = [MemberProcess(tmp_path, ",".join([victim_address, *survivors]), "g-load",
                                 "load", f"m{i}", 6000) for i in range(2)]
        writers = KeyedWriters(endpoint, "load")
        try:
            wait_for(lambda: all(len(group.assignment().get(m.reader_id, [])) == 3
                                 for m in members), "three segments per member", 60)
            writers.advance(40, "40 events per writer")
            wait_for(lambda: all(len(m.events()) >= 20 for m in members),
                     "both members reading", 60)
            victim = next(b for b in brokers if b.address == victim_address)
            assert victim.kill() == -signal.SIGKILL
            # Every round writes every key, so each writer's progress needs the
            # killed broker's segments written on another broker.
            writers.advance(80, "80 more events per writer after the SIGKILL")
            moved = segment_owners(survivors, "load", SEGMENTS)
            assert all(moved[s] in survivors for s in busy), moved
            wait_spread(survivors[0], [COUNT // 2] * 2)
            acked = writers.stop()
            _members_read_all(members, acked)
            ends = segment_ends(endpoint, "load")
            wait_read_to_ends(lambda: [m.reads() for m in members], ends)
            check_read_once(acked, [m.reads() for m in members], ends)
            for member in members:
                assert "rejoining" not in member.log(), member.log()
                assert member.stop(signal.SIGTERM) == 0, member.log()
        finally:
            writers.stop_writing()
            for member in members:
                member.reap()


def _reported(zk: KazooClient, group: str, reader_id: str) -> dict[str, int]:
    """The offsets ``reader_id`` last heartbeated, as stored for the group's sweeper."""
    data, _ = zk.get(f"{HEARTBEATS_ROOT}/{group}/{reader_id}")
    offsets: dict[str, int] = json.loads(data)["offsets"]
    return offsets


@pytest.mark.timeout(300)
def test_a_group_goes_on_when_its_sweeping_broker_and_a_member_are_killed_together(
        zookeeper: ZooKeeperServer, zk_url: str, bookie_processes: BookieProcesses,
        tmp_path: Path) -> None:
    _, brokers = start_cluster(bookie_processes, zk_url, tmp_path)
    addresses = [b.address for b in brokers]
    endpoint = ",".join(addresses)
    timeout_ms = 4000
    zk = zk_client(zookeeper.address + zk_url.removeprefix(f"zk://{zookeeper.address}"))
    sweeper_address = container_owner(addresses[0], "_readergroup/g-fo")
    assert sweeper_address in addresses
    survivors = [a for a in addresses if a != sweeper_address]
    with folio.Client(endpoint, timeout_s=30) as client:
        client.create_topic("rg", 4)
        client.reader_group("g-fo", ["rg"], "earliest", session_timeout_ms=timeout_ms)
        # The sweeper first: the members' admin broker, where their heartbeats go
        # until it dies (then to another broker).
        members = [MemberProcess(tmp_path, ",".join([sweeper_address, *survivors]), "g-fo",
                                 "rg", f"m{i}", timeout_ms) for i in range(2)]
        live, dead = members
        writers = KeyedWriters(endpoint, "rg", writers=2)
        try:
            with folio.Client(",".join(survivors), timeout_s=30) as watcher:
                group = watcher.reader_group("g-fo")
                wait_for(lambda: all(len(group.assignment().get(m.reader_id, [])) == 2
                                     for m in members), "two segments per member", 60)
                orphaned = set(group.assignment()["m1"])
                writers.advance(40, "40 events per writer")
                # The doomed member has reported a position in each of its segments.
                wait_for(lambda: zk.exists(f"{HEARTBEATS_ROOT}/g-fo/m1") is not None and all(
                    _reported(zk, "g-fo", "m1").get(s, 0) > 0 for s in orphaned),
                    "the doomed member reported positions", 60)
                read_before = len(live.reads())
                sweeper = next(b for b in brokers if b.address == sweeper_address)
                assert sweeper.kill() == -signal.SIGKILL
                assert dead.stop(signal.SIGKILL) == -signal.SIGKILL
                wait_for(lambda: container_owner(survivors[0], "_readergroup/g-fo")
                         in survivors, "a new sweeper", 60)
                # Read once the new sweeper is there (a heartbeat in flight at the
                # kill has landed by then), before it frees the segments (a whole
                # session timeout later) and forgets the node.
                recorded = _reported(zk, "g-fo", "m1")

                def only_live_online() -> bool:
                    online = group.online_readers()
                    assert "m0" in online, "the live member was declared offline"
                    return online == ["m0"]

                wait_for(only_live_online, "the killed member declared offline", 60)
                wait_for(lambda: set(group.assignment()["m0"]) >= orphaned,
                         "the killed member's segments taken by the live one", 60)
                writers.advance(40, "40 more events per writer after the kills")
                acked = writers.stop()
                _members_read_all(members, acked)
                # The survivor reads each freed segment from the position the dead
                # member reported: what the dead one read past it is read again
                # (at-least-once), nothing before it, nothing skipped.
                reread = {}
                for segment in orphaned:
                    resumed = min(o for _, s, o in live.reads()[read_before:] if s == segment)
                    assert resumed == recorded[segment], (segment, resumed, recorded)
                    past = [o for _, s, o in dead.reads() if s == segment and o >= resumed]
                    reread[segment] = range(resumed, max(past, default=resumed - 1) + 1)
                ends = segment_ends(endpoint, "rg")
                wait_read_to_ends(lambda: [m.reads() for m in members], ends)
                check_read_once(acked, [m.reads() for m in members], ends, reread)
                assert "rejoining" not in live.log(), live.log()
                assert live.stop(signal.SIGTERM) == 0, live.log()
                assert group.online_readers() == []
        finally:
            writers.stop_writing()
            for member in members:
                member.reap()
            zk.stop()
            zk.close()
