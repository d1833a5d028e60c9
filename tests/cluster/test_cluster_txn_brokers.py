"""Transactions across brokers: segments owned by every broker of a cluster, through the SDK.

Real processes (ZooKeeper, 3 bookies E=3/Qw=2/Qa=2, 3 brokers). The topic is
chosen so that its 3 segments are owned by 3 different brokers; the SDK's
transactional writer (unchanged: it follows WrongHost to the coordinator and
to each segment's owner) writes to all of them in one transaction. Segment
owners register the segments with the coordinator and take its markers over
the internal protocol (docs/cluster.md, "The transaction coordinator").
"""

from __future__ import annotations

import time
from bisect import bisect_right
from pathlib import Path

import pytest

import folio
from bench._cluster_client import list_brokers, lookup_owner
from broker.cluster.containers import container_of
from folio.api.v1.routing import routing_point
from folio.read.reader import Isolation
from tests.support.bookies import BookieProcess, BookieProcesses
from tests.support.cluster_load import COUNT
from tests.support.cluster_load import start_cluster as _cluster
from tests.support.wait import wait_for

COORDINATOR = container_of("_txnlog/0", COUNT)
SEGMENTS = 3


def _owners_by_container(address: str) -> dict[int, str]:
    return {container: b.address for b in list_brokers(address).brokers
            for container in b.containers}


def _spread_topic(address: str) -> str:
    """A topic name whose segments 0..2 are in containers of three different brokers."""
    owners = _owners_by_container(address)
    for i in range(10_000):
        name = f"xb{i}"
        held = {owners.get(container_of(f"{name}/{n}", COUNT)) for n in range(SEGMENTS)}
        if len(held) == SEGMENTS and None not in held:
            return name
    raise AssertionError("no topic name spreads over the three brokers")


def _keys(client: folio.Client, topic: str) -> list[str]:
    """One routing key per segment, in segment order."""
    highs = [s.key_high for s in client.get_segments(topic)]
    chosen: dict[int, str] = {}
    n = 0
    while len(chosen) < len(highs):
        key = f"key-{n}"
        n += 1
        chosen.setdefault(min(bisect_right(highs, routing_point(key)), len(highs) - 1), key)
    return [chosen[i] for i in range(len(highs))]


def _read(client: folio.Client, topic: str, isolation: Isolation, want: int,
          wait_s: float = 30.0) -> list[bytes]:
    """What a reader from the earliest offsets gets: ``want`` events, then nothing more."""
    got: list[bytes] = []
    with client.reader(topic, isolation=isolation) as reader:
        deadline = time.monotonic() + wait_s
        while len(got) < want and time.monotonic() < deadline:
            event = reader.read_next(timeout=0.2)
            if event is not None:
                got.append(event.payload)
        extra = reader.read_next(timeout=1.0)
        if extra is not None:
            got.append(extra.payload)
    return got


def _setup(processes: BookieProcesses, url: str,
           base: Path) -> tuple[list[BookieProcess], list[str], str, list[str]]:
    """The cluster, a topic spread over its brokers, one key per segment."""
    _, brokers = _cluster(processes, url, base)
    addresses = [b.address for b in brokers]
    topic = _spread_topic(addresses[0])
    with folio.Client(",".join(addresses), timeout_s=30) as client:
        client.create_topic(topic, SEGMENTS)
        keys = _keys(client, topic)
    owners = {lookup_owner(addresses, f"{topic}/{n}") for n in range(SEGMENTS)}
    assert owners == set(addresses)
    return brokers, addresses, topic, keys


def _coordinator(address: str) -> str:
    return _owners_by_container(address).get(COORDINATOR, "")


@pytest.mark.timeout(300)
def test_a_transaction_over_all_brokers_commits_and_an_abort_shows_nothing(
        zk_url: str, bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    _, addresses, topic, keys = _setup(bookie_processes, zk_url, tmp_path)
    with folio.Client(",".join(addresses), timeout_s=30) as client, \
            client.transactional_writer(topic) as writer:
        aborted = writer.begin()
        for round_ in range(3):
            for key in keys:
                aborted.write_event(b"gone-%d" % round_, routing_key=key)
        aborted.flush()
        aborted.abort()
        assert aborted.status() == "ABORTED"
        with pytest.raises(folio.TxnStateError):
            aborted.write_event(b"late", routing_key=keys[0])

        committed = writer.begin()
        payloads = [b"k%d-r%d" % (i, r) for r in range(3) for i in range(len(keys))]
        for index, payload in enumerate(payloads):
            committed.write_event(payload, routing_key=keys[index % len(keys)])
        committed.flush()
        # Not visible before the commit (and the abort's markers let readers past it).
        assert _read(client, topic, "read_committed", 1, wait_s=1.0) == []
        committed.commit()
        assert committed.status() == "COMMITTED"
        assert sorted(_read(client, topic, "read_committed", len(payloads))) == sorted(payloads)
        assert len(_read(client, topic, "read_uncommitted", 2 * len(payloads))) == \
            2 * len(payloads)
        # Every segment (each on its own broker) holds its share of both transactions.
        assert [s.end_offset for s in client.get_segments(topic)] == [6, 6, 6]

    # A timeout aborts through the same markers: later commits are visible past it.
    with folio.Client(",".join(addresses), timeout_s=30) as client, \
            client.transactional_writer(topic, txn_timeout_ms=2_000) as short:
        expired = short.begin()
        for key in keys:
            expired.write_event(b"expired", routing_key=key)
        expired.flush()
        wait_for(lambda: expired.status() == "TIMED_OUT", "the timeout's abort", 60)
        with short.begin() as last:
            for key in keys:
                last.write_event(b"last", routing_key=key)
        committed_now = sorted([*payloads, *[b"last"] * len(keys)])
        assert sorted(_read(client, topic, "read_committed", len(committed_now))) == \
            committed_now


@pytest.mark.timeout(300)
def test_sigkill_of_a_participant_broker_mid_transaction_then_commit(
        zk_url: str, bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    brokers, addresses, topic, keys = _setup(bookie_processes, zk_url, tmp_path)
    coordinator = _coordinator(addresses[0])
    # A segment owned by a broker that is not the coordinator's.
    victim_segment = next(n for n in range(SEGMENTS)
                          if lookup_owner(addresses, f"{topic}/{n}") != coordinator)
    victim_address = lookup_owner(addresses, f"{topic}/{victim_segment}")
    acknowledged: list[bytes] = []
    with folio.Client(",".join(addresses), timeout_s=60) as client, \
            client.transactional_writer(topic) as writer:
        txn = writer.begin()
        for index, key in enumerate(keys):
            txn.write_event(b"before-%d" % index, routing_key=key)
        txn.flush()
        acknowledged += [b"before-%d" % i for i in range(len(keys))]
        next(b for b in brokers if b.address == victim_address).kill()
        survivors = [a for a in addresses if a != victim_address]
        wait_for(lambda: lookup_owner(survivors, f"{topic}/{victim_segment}") in survivors,
                 "a new owner of the killed broker's segment", 60)
        for index, key in enumerate(keys):
            txn.write_event(b"after-%d" % index, routing_key=key)
        # docs/cluster.md: the commit still lands every acknowledged event once
        # (the new owner recovered the segment's ledger with the events the
        # dead broker acknowledged; the flush resends what was not).
        txn.flush()
        acknowledged += [b"after-%d" % i for i in range(len(keys))]
        txn.commit()
        assert txn.status() == "COMMITTED"
        got = _read(client, topic, "read_committed", len(acknowledged))
        # Read back independently: the segments hold exactly these events.
        ends = [s.end_offset for s in client.get_segments(topic)]
    assert sorted(got) == sorted(acknowledged)  # every acknowledged event, once
    assert sum(ends) == len(acknowledged), ends


@pytest.mark.timeout(300)
def test_sigkill_of_the_coordinator_between_appends_then_commit_on_the_successor(
        zk_url: str, bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    brokers, addresses, topic, keys = _setup(bookie_processes, zk_url, tmp_path)
    coordinator = _coordinator(addresses[0])
    with folio.Client(",".join(addresses), timeout_s=60) as client, \
            client.transactional_writer(topic) as writer:
        txn = writer.begin()
        for index, key in enumerate(keys):
            txn.write_event(b"before-%d" % index, routing_key=key)
        txn.flush()
        next(b for b in brokers if b.address == coordinator).kill()
        survivors = [a for a in addresses if a != coordinator]
        wait_for(lambda: _coordinator(survivors[0]) in survivors, "a new coordinator", 60)
        for index, key in enumerate(keys):
            txn.write_event(b"after-%d" % index, routing_key=key)
        txn.flush()
        txn.commit()
        assert txn.status() == "COMMITTED"
        expected = [b"%s-%d" % (when, i) for when in (b"before", b"after")
                    for i in range(len(keys))]
        assert sorted(_read(client, topic, "read_committed", len(expected))) == \
            sorted(expected)
        # The segments stayed on several brokers (two survivors).
        owners = {lookup_owner(survivors, f"{topic}/{n}") for n in range(SEGMENTS)}
        assert owners == set(survivors)
