"""Load on a cluster of real processes: the cluster, SDK writers of keyed events, the end check.

``start_cluster`` starts ``folio cluster init`` (``COUNT`` containers, E=3
Qw=2 Qa=2), 3 bookies and N brokers and waits until the brokers share the
containers evenly (``wait_spread``, through ListBrokers). ``KeyedWriters``
runs SDK writers (exactly-once: each its own writer id) on threads, each
writing rounds of one event per key (payload ``w<i>:k<j>:<n>``, routing key
``k<j>``) and waiting for the round's acknowledgements before the next, so
every acknowledged payload is known and any error a writer sees is kept.
``check_read_once`` compares what reader group members read (``(payload,
segment, offset)``, ``tests/support/member_process.py``) with what was
acknowledged and with the segments' end offsets, read back independently
(``segment_ends``; ``wait_read_to_ends`` waits until the members reached
them): every event once, in per-key order, each offset of each segment up
to its end read once, so a duplicate stored after the last acknowledged
event is seen too.
"""

from __future__ import annotations

import threading
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import grpc

import folio
from bench._cluster_client import list_brokers, lookup_owner
from broker.cluster.containers import container_of
from tests.support.bookies import BookieProcess, BookieProcesses
from tests.support.cluster import LocalCluster
from tests.support.wait import wait_for

__all__ = ["COUNT", "KeyedWriters", "check_read_once", "container_owner", "segment_ends",
           "segment_owners", "start_cluster", "wait_read_to_ends", "wait_spread"]

#: One member's reads: ``(payload, segment, offset)`` in its order.
Reads = list[tuple[str, str, int]]

#: Segment containers of the test clusters.
COUNT = 12


def wait_spread(broker: str, expected: list[int], timeout_s: float = 60) -> None:
    """Wait until ListBrokers on ``broker`` shows every container owned, ``expected`` per broker."""
    def even() -> bool:
        try:
            listed = list_brokers(broker)
        except grpc.RpcError:
            return False
        return sorted(len(b.containers) for b in listed.brokers) == expected and sum(
            len(b.containers) for b in listed.brokers) == COUNT

    wait_for(even, f"containers spread {expected}", timeout_s=timeout_s)


def start_cluster(processes: BookieProcesses, url: str, base: Path,
                  brokers: int = 3) -> tuple[LocalCluster, list[BookieProcess]]:
    """3 bookies (E=3 Qw=2 Qa=2) and ``brokers`` brokers sharing ``COUNT`` containers."""
    cluster = LocalCluster(processes, url, base)
    cluster.init(container_count=COUNT, ensemble_size=3, write_quorum=2, ack_quorum=2)
    for _ in range(3):
        cluster.start_bookie()
    started = [cluster.start_broker() for _ in range(brokers)]
    wait_spread(started[0].address, [COUNT // brokers] * brokers)
    return cluster, started


def segment_owners(addresses: list[str], topic: str, segments: int) -> dict[str, str]:
    """``{segment: owner address}`` of the topic's first segments, as the brokers say."""
    return {f"{topic}/{n}": lookup_owner(addresses, f"{topic}/{n}") for n in range(segments)}


def container_owner(address: str, name: str) -> str:
    """The broker owning the container of ``name`` (a segment name), as ``address`` sees it."""
    container = container_of(name, COUNT)
    return next((b.address for b in list_brokers(address).brokers
                 if container in b.containers), "")


class KeyedWriters:
    """SDK writers on threads, each writing rounds of one event per key until stopped.

    Args:
        endpoint: the client's bootstrap list (``host:port,host:port``).
        topic: the topic written.
        writers: how many writers (each its own client and writer id).
        keys: routing keys per round.
    """

    def __init__(self, endpoint: str, topic: str, writers: int = 3, keys: int = 8) -> None:
        self.acked: list[list[str]] = [[] for _ in range(writers)]
        self.errors: list[BaseException] = []
        self._keys = keys
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(endpoint, topic, i),
                                          daemon=True) for i in range(writers)]
        for thread in self._threads:
            thread.start()

    def _run(self, endpoint: str, topic: str, index: int) -> None:
        acked = self.acked[index]
        try:
            with folio.Client(endpoint, timeout_s=30) as client, \
                    client.writer(topic, linger_ms=2, writer_id=f"w{index}") as writer:
                n = 0
                while not self._stop.is_set():
                    round_ = [(f"w{index}:k{k}:{n}", writer.write_event(
                        f"w{index}:k{k}:{n}".encode(), routing_key=f"k{k}"))
                        for k in range(self._keys)]
                    for payload, future in round_:
                        future.result(120)
                        acked.append(payload)
                    n += 1
        except BaseException as error:  # any error a writer sees fails the test
            self.errors.append(error)

    def _check(self) -> None:
        assert self.errors == [], [(error, getattr(error, "error_name", None),
                                    getattr(error, "retriable", None)) for error in self.errors]

    def count(self) -> int:
        """Events acknowledged so far, all writers together."""
        return sum(len(a) for a in self.acked)

    def advance(self, more: int, what: str, timeout_s: float = 90) -> None:
        """Wait until every writer has ``more`` acknowledged events beyond now."""
        targets = [len(a) + more for a in self.acked]
        wait_for(lambda: bool(self.errors) or all(
            len(a) >= t for a, t in zip(self.acked, targets, strict=True)), what,
            timeout_s=timeout_s)
        self._check()

    def stop_writing(self) -> None:
        """Ask every writer to stop after its round (a test's cleanup; ``stop`` checks)."""
        self._stop.set()

    def stop(self) -> set[str]:
        """Stop writing (each finishes its round); every acknowledged payload."""
        self._stop.set()
        for thread in self._threads:
            thread.join(150)
            assert not thread.is_alive(), "a writer did not finish its round"
        self._check()
        acked = {payload for a in self.acked for payload in a}
        assert len(acked) == self.count()
        return acked


def segment_ends(endpoint: str, topic: str) -> dict[str, int]:
    """``{segment: end offset}`` of every segment ``topic`` ever had, as the brokers say."""
    with folio.Client(endpoint, timeout_s=30) as client:
        return {s.name: s.end_offset
                for s in client.get_segments(topic, include_sealed=True)}


def wait_read_to_ends(reads: Callable[[], Iterable[Reads]], ends: Mapping[str, int],
                      timeout_s: float = 90) -> None:
    """Wait until the members have read every segment up to its end offset."""
    def reached() -> bool:
        last: dict[str, int] = defaultdict(lambda: -1)
        for member in reads():
            for _, segment, offset in member:
                last[segment] = max(last[segment], offset)
        return all(last[segment] + 1 >= end for segment, end in ends.items())

    wait_for(reached, "the group read every segment to its end offset", timeout_s)


def check_read_once(acked: set[str], members: Iterable[Reads], ends: Mapping[str, int],
                    reread: Mapping[str, range] | None = None) -> None:
    """Every acknowledged event read exactly once by the group, in per-key order.

    Args:
        acked: every acknowledged payload.
        members: each member's reads, ``(payload, segment, offset)`` in its order.
        ends: every segment's end offset (``segment_ends``), read after the
            writers stopped: every offset below it must have been read.
        reread: offsets of a segment that may be read twice (``{segment:
            range}``: what a member that crashed read after the position it last
            reported, which its successor reads again: at-least-once).
    """
    reread = reread or {}
    counts: Counter[tuple[str, int]] = Counter()
    stored: dict[str, dict[int, str]] = defaultdict(dict)
    for reads in members:
        last: dict[str, int] = {}
        for payload, segment, offset in reads:
            counts[segment, offset] += 1
            assert stored[segment].setdefault(offset, payload) == payload, (segment, offset)
            # A member reads one key's events in the order they were written.
            writer, key, number = payload.split(":")
            assert last.get(f"{writer}:{key}", -1) < int(number), (segment, offset, payload)
            last[f"{writer}:{key}"] = int(number)
    doubled = sorted(place for place, count in counts.items()
                     if count > 1 and place[1] not in reread.get(place[0], range(0)))
    assert doubled == [], f"read twice: {doubled[:10]}"
    read = [payload for offsets in stored.values() for payload in offsets.values()]
    assert len(read) == len(set(read)), "an event is stored twice"
    assert set(read) == acked, (f"{len(acked - set(read))} acknowledged events not read",
                                sorted(set(read) - acked)[:5])
    assert set(stored) <= set(ends), sorted(set(stored) - set(ends))
    for segment, end in ends.items():
        # Nothing skipped, nothing stored unseen: every offset up to the end was read.
        assert sorted(stored[segment]) == list(range(end)), (
            f"{segment}: read {len(stored[segment])} offsets of 0..{end - 1}")
