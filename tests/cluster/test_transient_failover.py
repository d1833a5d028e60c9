"""Transient failures reach no application (issue 22, items 3 and 4), with real processes.

ZooKeeper, 3 bookies (E=3 Qw=2 Qa=2) and 3 brokers with 2 s sessions; SDK
writers and transactions through the client's bootstrap list. Each test
breaks something for a while and asserts outcomes only: no error surfaced to
the application, and every segment read back to its end offset holds each
acknowledged (committed) event exactly once and nothing else. How long the
writes stalled is measured by ``python -m bench.failover``, not asserted here.

- The owner of a written segment is SIGSTOPped (TCP up, nothing answers):
  the writers leave it (keepalive), follow the segment to its new owner once
  the stopped broker's session expires, and go on; after SIGCONT the stopped
  broker (fenced out by then) doubles nothing.
- The transaction coordinator's broker is SIGKILLed while transactions
  begin, write, commit and abort in a loop: WrongHost naming the dead broker
  and the new coordinator's replay cost time, not an error.
- A bookie is SIGKILLed: with 2 bookies left no ledger can replace it
  (E=3), the brokers answer LedgerUnavailable, and the writers retry (past
  the 5 s after which they used to fail their events) until the bookie is
  back.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from pathlib import Path

import pytest

import folio
from bench._cluster_client import lookup_owner, read_segment
from bench._failover_load import keys_by_segment
from broker.cluster.containers import container_of
from folio.errors import LedgerUnavailableError
from tests.support.bookies import BookieProcesses
from tests.support.cluster import LocalCluster
from tests.support.cluster_load import (
    COUNT,
    KeyedWriters,
    container_owner,
    start_cluster,
    wait_spread,
)
from tests.support.wait import wait_for

pytestmark = pytest.mark.faults

TOPIC = "moving"
SEGMENTS = 4
COORDINATOR = container_of("_txnlog/0", COUNT)


def _stored(addresses: list[str], topic: str, segments: int, *,
            committed: bool = False) -> list[str]:
    """Every payload of the topic's segments, each read to its end offset."""
    return [payload.decode() for n in range(segments)
            for payload in read_segment(addresses, f"{topic}/{n}", committed=committed)]


def _check_once(addresses: list[str], acked: set[str]) -> None:
    stored = _stored(addresses, TOPIC, SEGMENTS)
    assert len(stored) == len(set(stored)), "an event is stored twice"
    assert set(stored) == acked, (len(acked - set(stored)), sorted(set(stored) - acked)[:5])


@pytest.mark.timeout(300)
def test_writes_leave_a_stopped_owner_and_nothing_is_doubled_after_it_resumes(
        zk_url: str, bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    _, brokers = start_cluster(bookie_processes, zk_url, tmp_path)
    addresses = [b.address for b in brokers]
    endpoint = ",".join(addresses)
    with folio.Client(endpoint, timeout_s=30) as client:
        client.create_topic(TOPIC, SEGMENTS)
        stopped_segment = next(iter(keys_by_segment(client, TOPIC)))
    writers = KeyedWriters(endpoint, TOPIC, writers=2, keys=8)
    try:
        writers.advance(10, "10 rounds before the pause")
        victim = next(b for b in brokers
                      if b.address == lookup_owner(addresses, stopped_segment))
        survivors = [a for a in addresses if a != victim.address]
        os.kill(victim.pid, signal.SIGSTOP)
        try:
            # Each round writes every key and waits for all: rounds go on only
            # once the stopped broker's segments are written elsewhere.
            writers.advance(20, "20 rounds while the owner is stopped")
            assert lookup_owner(survivors, stopped_segment) in survivors
        finally:
            os.kill(victim.pid, signal.SIGCONT)
        wait_spread(survivors[0], [COUNT // 3] * 3)  # it rejoined, its share moved back
        writers.advance(10, "10 rounds after it resumed and took its share back")
    finally:
        acked = writers.stop()  # raises if any writer saw an error
    _check_once(addresses, acked)


def _coordinator(address: str) -> str:
    return container_owner(address, "_txnlog/0")


class TxnLoop:
    """Transactions in a loop on a thread: begin, one event per key, commit (or abort)."""

    def __init__(self, endpoint: str, keys: list[str]) -> None:
        self.committed: list[str] = []
        self.aborted: list[str] = []
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(endpoint, keys), daemon=True)
        self._thread.start()

    def _run(self, endpoint: str, keys: list[str]) -> None:
        try:
            with folio.Client(endpoint, timeout_s=30) as client, \
                    client.transactional_writer(TOPIC) as writer:
                n = 0
                while not self._stop.is_set():
                    txn = writer.begin()
                    payloads = [f"t{n}-{k}" for k in range(len(keys))]
                    for payload, key in zip(payloads, keys, strict=True):
                        txn.write_event(payload.encode(), routing_key=key)
                    if n % 3 == 2:
                        txn.flush()
                        txn.abort()
                        self.aborted += payloads
                    else:
                        txn.commit()
                        self.committed += payloads
                    n += 1
        except BaseException as error:  # anything the application sees fails the test
            self.errors.append(error)

    def done(self) -> int:
        return len(self.committed) + len(self.aborted)

    def advance(self, more: int, what: str) -> None:
        target = self.done() + more
        wait_for(lambda: bool(self.errors) or self.done() >= target, what, timeout_s=120)
        assert self.errors == []

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(150)
        assert not self._thread.is_alive(), "the transaction loop did not finish"
        assert self.errors == [], [(type(e).__name__, str(e)) for e in self.errors]


@pytest.mark.timeout(300)
def test_a_coordinator_move_during_begin_commit_and_abort_raises_nothing(
        zk_url: str, bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    _, brokers = start_cluster(bookie_processes, zk_url, tmp_path)
    addresses = [b.address for b in brokers]
    endpoint = ",".join(addresses)
    with folio.Client(endpoint, timeout_s=30) as client:
        client.create_topic(TOPIC, SEGMENTS)
        keys = list(keys_by_segment(client, TOPIC).values())
    coordinator = _coordinator(addresses[0])
    survivors = [a for a in addresses if a != coordinator]
    loop = TxnLoop(endpoint, keys)
    try:
        loop.advance(5 * len(keys), "5 transactions before the kill")
        next(b for b in brokers if b.address == coordinator).kill()
        wait_for(lambda: _coordinator(survivors[0]) in survivors, "a new coordinator", 60)
        loop.advance(10 * len(keys), "10 transactions on the new coordinator")
    finally:
        loop.stop()
    stored = _stored(survivors, TOPIC, SEGMENTS, committed=True)
    assert sorted(stored) == sorted(loop.committed)  # each committed event once
    assert not set(stored) & set(loop.aborted)


@pytest.mark.timeout(300)
def test_a_bookie_down_for_a_while_fails_no_write(
        zk_url: str, bookie_processes: BookieProcesses, tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="folio.write._segment_flow")
    cluster = LocalCluster(bookie_processes, zk_url, tmp_path)
    cluster.init(container_count=COUNT, ensemble_size=3, write_quorum=2, ack_quorum=2)
    bookies = [cluster.start_bookie() for _ in range(3)]
    brokers = [cluster.start_broker() for _ in range(3)]
    addresses = [b.address for b in brokers]
    wait_spread(addresses[0], [COUNT // 3] * 3)
    endpoint = ",".join(addresses)
    with folio.Client(endpoint, timeout_s=30) as client:
        client.create_topic(TOPIC, SEGMENTS)
    writers = KeyedWriters(endpoint, TOPIC, writers=2, keys=8)

    def retried_for() -> float:
        """Seconds between the first and the last retry of LedgerUnavailable logged."""
        times = [r.created for r in caplog.records if isinstance(r.args, tuple)
                 and len(r.args) > 1 and isinstance(r.args[1], LedgerUnavailableError)]
        return max(times) - min(times) if times else 0.0

    try:
        writers.advance(10, "10 rounds before the bookie is killed")
        bookies[0].kill()
        # Longer than the 5 s after which a writer used to fail its events.
        wait_for(lambda: bool(writers.errors) or retried_for() > 6.0,
                 "writers retrying LedgerUnavailable for more than 6 s", timeout_s=90)
        assert writers.errors == []
        cluster.start_bookie(data_dir=bookies[0].data_dir)
        writers.advance(10, "10 rounds once the bookie is back")
    finally:
        acked = writers.stop()
    _check_once(addresses, acked)
