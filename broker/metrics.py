"""The broker's Prometheus metrics: every collector of the ``broker`` package.

Registered in ``prometheus_client``'s default registry at import; the
``folio standalone`` and ``folio broker`` processes serve it on ``/metrics``.
Names follow Prometheus' conventions (``folio_`` prefix, base units,
``_total`` counters, ``_seconds`` and ``_bytes``). Labels stay bounded:
``topic``, ``state``, ``code``, ``rpc``, reader ``group`` — never a writer,
a segment or an event.

Cost: the append and read paths call one helper per append (one entry, however
many events it packs) or per read batch, which does a dict lookup and a few
counter increments; gauges describing state (segments, transactions, aborted
sets) are computed when Prometheus scrapes, from the broker objects handed to
``watch_broker``. ``docs/observability.md`` lists every metric.
"""

from __future__ import annotations

import threading
import weakref
from collections import Counter as Tally
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from typing import Any, Protocol

import grpc
from prometheus_client import REGISTRY, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from broker.status import status_for
from ledger.metrics import LATENCY_BUCKETS_S

__all__ = [
    "APPEND_SECONDS",
    "OWNERSHIP_PHASE",
    "count_member_offline",
    "count_unexpected",
    "forget_reader_group",
    "observe_append",
    "observe_error",
    "observe_error_code",
    "observe_read",
    "observe_read_wake",
    "observe_txn_buffer_recovery",
    "observe_txn_buffer_snapshot",
    "open_stream",
    "set_group_lags",
    "set_reader_group_backlog",
    "set_share_in_flight",
    "topic_of",
    "watch_broker",
]

APPENDED_EVENTS = Counter(
    "folio_appended_events_total", "Events appended (durable), by topic.", ["topic"])
APPENDED_BYTES = Counter(
    "folio_appended_bytes_total", "Bytes of event blocks appended (durable), by topic.",
    ["topic"])
APPEND_SECONDS = Histogram(
    "folio_append_seconds",
    "Seconds from a segment taking an append (one block, or one transaction's blocks) "
    "until it is durable and acknowledged.",
    buckets=LATENCY_BUCKETS_S,
)
READ_WAKE_SECONDS = Histogram(
    "folio_read_wake_seconds",
    "Seconds from a segment's end moving (an append confirmed, a commit, a seal) until a "
    "Read stream waiting at the tail ran again: the event loop's queue, no timer.",
    buckets=LATENCY_BUCKETS_S,
)
READ_EVENTS = Counter(
    "folio_read_events_total", "Events served to readers, by topic.", ["topic"])
READ_BYTES = Counter(
    "folio_read_bytes_total", "Bytes of event blocks served to readers, by topic.", ["topic"])
ERRORS = Counter(
    "folio_errors_total",
    "Requests the broker refused or failed, by gRPC status code (in-band Append refusals "
    "count with the code of their error).",
    ["code"],
)
ACTIVE_STREAMS = Gauge(
    "folio_active_streams", "Open streaming calls, by RPC (Append, Read, ...).", ["rpc"])
ACTIVE_CONNECTIONS = Gauge(
    "folio_active_connections", "Client connections (distinct peers) with an open stream.")
APPEND_FLOWS = Gauge(
    "folio_append_flows", "Writer flows (SetupAppend) bound on open Append streams.")
# Set by broker.cluster.session_gate (docs/cluster.md, "Session loss").
OWNERSHIP_PHASE = Gauge(
    "folio_broker_ownership_phase",
    "A cluster broker's phase by its metadata (ZooKeeper) session, 1 for the phase now: "
    "serving (connected), paused (connection lost: writes refused with a retriable WrongHost, "
    "nothing unloaded), stopped (session expired or lost for the session timeout: "
    "containers given up).",
    ["phase"])
SNAPSHOT_WRITE_SECONDS = Histogram(
    "folio_txn_buffer_snapshot_write_seconds",
    "Seconds to write one transaction-buffer snapshot of a segment.",
    buckets=LATENCY_BUCKETS_S,
)
RECOVERY_SECONDS = Histogram(
    "folio_txn_buffer_recovery_seconds",
    "Seconds to recover one segment's transaction buffer (snapshot load and replay).",
    buckets=LATENCY_BUCKETS_S,
)
READER_GROUP_BACKLOG = Gauge(
    "folio_reader_group_backlog_events",
    "Events between a reader group's offsets and the tails of its segments.",
    ["group"],
)
READER_GROUP_MEMBERS_OFFLINE = Counter(
    "folio_reader_group_members_declared_offline",
    "Reader group members the broker declared offline after their session timeout.",
    ["group"],
)

# ---------------------------------------------------------------- append, read

_appends: dict[str, tuple[Any, Any]] = {}
_reads: dict[str, tuple[Any, Any]] = {}


def topic_of(segment: str) -> str:
    """The topic of a segment name ``"<topic>/<number>"``."""
    return segment.rpartition("/")[0] or segment


def observe_append(topic: str, events: int, data_bytes: int, seconds: float) -> None:
    """Record one durable append of ``events`` events in ``data_bytes`` bytes of blocks."""
    children = _appends.get(topic)
    if children is None:
        children = _appends[topic] = (APPENDED_EVENTS.labels(topic), APPENDED_BYTES.labels(topic))
    children[0].inc(events)
    children[1].inc(data_bytes)
    APPEND_SECONDS.observe(seconds)


def observe_read_wake(seconds: float) -> None:
    """Record how long a tailing Read stream took to run after its segment's end moved."""
    READ_WAKE_SECONDS.observe(seconds)


def observe_read(segment: str, events: int, data_bytes: int) -> None:
    """Record one read batch served from ``segment``."""
    children = _reads.get(segment)
    if children is None:
        topic = topic_of(segment)
        children = _reads[segment] = (READ_EVENTS.labels(topic), READ_BYTES.labels(topic))
    children[0].inc(events)
    children[1].inc(data_bytes)


def observe_error(error: BaseException) -> None:
    """Count ``error`` under the status code the one table gives it."""
    observe_error_code(status_for(error)[0])


def observe_error_code(code: grpc.StatusCode) -> None:
    """Count one refused or failed request with ``code``."""
    ERRORS.labels(code.name).inc()


# ------------------------------------------------------------ streams, flows

_peers: Tally[str] = Tally()
_peers_lock = threading.Lock()


@contextmanager
def count_unexpected() -> Iterator[None]:
    """Count an exception escaping a servicer (gRPC answers UNKNOWN) as an UNKNOWN error.

    Domain errors never get here: servicers end the call with ``abort_with``,
    which counts them (its ``AbortError`` passes through uncounted).
    """
    try:
        yield
    except grpc.aio.AbortError:
        raise
    except Exception:
        observe_error_code(grpc.StatusCode.UNKNOWN)
        raise


@contextmanager
def open_stream(rpc: str, peer: str) -> Iterator[None]:
    """Count a streaming call of ``rpc`` from ``peer`` (one connection) while it is open.

    An exception escaping the call counts as an UNKNOWN error (``count_unexpected``).
    """
    ACTIVE_STREAMS.labels(rpc).inc()
    with _peers_lock:
        _peers[peer] += 1
        ACTIVE_CONNECTIONS.set(len(_peers))
    try:
        with count_unexpected():
            yield
    finally:
        ACTIVE_STREAMS.labels(rpc).dec()
        with _peers_lock:
            _peers[peer] -= 1
            if _peers[peer] <= 0:
                del _peers[peer]
            ACTIVE_CONNECTIONS.set(len(_peers))


def flows_bound(count: int) -> None:
    """``count`` flows were bound (positive) or ended with their stream (negative)."""
    APPEND_FLOWS.inc(count)


# ------------------------------------------------------------ transactions

def observe_txn_buffer_snapshot(seconds: float) -> None:
    """Record one transaction-buffer snapshot write."""
    SNAPSHOT_WRITE_SECONDS.observe(seconds)


def observe_txn_buffer_recovery(seconds: float) -> None:
    """Record one transaction-buffer recovery."""
    RECOVERY_SECONDS.observe(seconds)


# ------------------------------------------------------------ reader groups

def set_reader_group_backlog(group: str, events: int) -> None:
    """Set ``group``'s backlog: events between its reader offsets and its segments' tails."""
    READER_GROUP_BACKLOG.labels(group).set(events)


#: ``folio_group_lag`` by kind: (group, topic, partition) -> lag; each kind's dict
#: is replaced whole (one reference swap), read by the scraping thread.
_group_lags: dict[str, dict[tuple[str, str, str], int]] = {}


def set_group_lags(kind: str, lags: dict[tuple[str, str, str], int]) -> None:
    """Report ``folio_group_lag`` of ``kind`` per (group, topic, partition) from now on.

    Replaces the kind's previous series (a deleted group, a partition no
    longer held are gone); ``lags`` is kept, not copied: the caller gives a
    fresh dict each time and never changes it after. O(1) here: the series
    are built when Prometheus scrapes, on its thread, so tens of thousands
    of them never hold the event loop (a Gauge child per series took ~10 us
    each to set).
    """
    _group_lags[kind] = lags


class _GroupLagCollector(Collector):
    """``folio_group_lag{kind,group,topic,partition}`` from the last ``set_group_lags``."""

    def describe(self) -> Iterable[Metric]:
        return [self._family()]

    def collect(self) -> Iterable[Metric]:
        family = self._family()
        for kind, lags in list(_group_lags.items()):
            for (group, topic, partition), lag in lags.items():
                family.add_metric([kind, group, topic, partition], lag)
        return [family]

    @staticmethod
    def _family() -> GaugeMetricFamily:
        return GaugeMetricFamily(
            "folio_group_lag",
            "Events between a group's offset and the end of a partition (Kafka groups: "
            "committed offset; reader groups: reader position, partition = segment number). "
            "Set on the maintenance round.",
            labels=["kind", "group", "topic", "partition"])


REGISTRY.register(_GroupLagCollector())

#: ``folio_share_in_flight_records``: its one dict, (group, topic, partition) -> records,
#: replaced whole (one reference swap), read by the scraping thread.
_share_in_flight: list[dict[tuple[str, str, str], int]] = [{}]


def set_share_in_flight(in_flight: dict[tuple[str, str, str], int]) -> None:
    """Report each share partition's in-flight records from now on (as ``set_group_lags``:
    replaces the previous series, ``in_flight`` kept, never changed after)."""
    _share_in_flight[0] = in_flight


class _ShareInFlightCollector(Collector):
    """``folio_share_in_flight_records{group,topic,partition}`` (Kafka's share partition
    ``InFlightMessageCount``) from the last ``set_share_in_flight``."""

    def describe(self) -> Iterable[Metric]:
        return [self._family()]

    def collect(self) -> Iterable[Metric]:
        family = self._family()
        for (group, topic, partition), count in list(_share_in_flight[0].items()):
            family.add_metric([group, topic, partition], count)
        return [family]

    @staticmethod
    def _family() -> GaugeMetricFamily:
        return GaugeMetricFamily(
            "folio_share_in_flight_records",
            "Records of a Kafka share partition between its start offset and the next "
            "offset never fetched: acquired, available again, or acknowledged above the "
            "start (Kafka's InFlightMessageCount). Set on the maintenance round.",
            labels=["group", "topic", "partition"])


REGISTRY.register(_ShareInFlightCollector())


def count_member_offline(group: str) -> None:
    """Count one member of ``group`` declared offline by the broker (silent too long)."""
    READER_GROUP_MEMBERS_OFFLINE.labels(group).inc()


def forget_reader_group(group: str) -> None:
    """Drop ``group``'s series (the group was deleted)."""
    with suppress(KeyError):
        READER_GROUP_BACKLOG.remove(group)
    with suppress(KeyError):
        READER_GROUP_MEMBERS_OFFLINE.remove(group)


# ------------------------------------------------------------ state at scrape

class _Buffer(Protocol):
    @property
    def aborted_count(self) -> int: ...


class _Segment(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def sealed(self) -> bool: ...

    @property
    def txn_buffer(self) -> _Buffer | None: ...


class _Topics(Protocol):
    def loaded_segments(self) -> list[Any]: ...


class _Coordinator(Protocol):
    def count_by_state(self) -> dict[str, int]: ...


_topics: weakref.WeakSet[Any] = weakref.WeakSet()
_coordinators: weakref.WeakSet[Any] = weakref.WeakSet()

#: Segment states reported (always, zero included, so dashboards see the series).
SEGMENT_STATES = ("open", "sealed")
#: Transaction states reported (as ``broker.txn.coordinator.TxnState`` names, lower case).
TXN_STATES = ("open", "committing", "committed", "aborting", "aborted", "timed_out")


def watch_broker(topics: _Topics, coordinator: _Coordinator | None = None) -> None:
    """Report ``topics``' segments and ``coordinator``'s transactions while they live."""
    _topics.add(topics)
    if coordinator is not None:
        _coordinators.add(coordinator)


class _StateCollector(Collector):
    """Gauges computed at scrape time, on the scraping thread, from copies."""

    def describe(self) -> Iterable[Metric]:
        return self._families(with_values=False)

    def collect(self) -> Iterable[Metric]:
        return self._families(with_values=True)

    @staticmethod
    def _families(*, with_values: bool) -> list[Metric]:
        segments = GaugeMetricFamily(
            "folio_segments", "Segments this broker has loaded, by state.", labels=["state"])
        txns = GaugeMetricFamily(
            "folio_transactions", "Transactions the coordinator knows, by state.",
            labels=["state"])
        aborted = GaugeMetricFamily(
            "folio_txn_buffer_aborted_txns",
            "Aborted transactions the transaction buffers remember (the aborted set), by topic.",
            labels=["topic"])
        if not with_values:
            return [segments, txns, aborted]
        by_state: Tally[str] = Tally()
        by_topic: Tally[str] = Tally()
        for topics in list(_topics):
            for segment in topics.loaded_segments():
                by_state["sealed" if segment.sealed else "open"] += 1
                buffer = segment.txn_buffer
                if buffer is not None:
                    by_topic[topic_of(segment.name)] += buffer.aborted_count
        for state in SEGMENT_STATES:
            segments.add_metric([state], by_state[state])
        txn_counts: Tally[str] = Tally()
        for coordinator in list(_coordinators):
            txn_counts.update(coordinator.count_by_state())
        for state in TXN_STATES:
            txns.add_metric([state], txn_counts[state])
        for topic, count in sorted(by_topic.items()):
            aborted.add_metric([topic], count)
        return [segments, txns, aborted]


REGISTRY.register(_StateCollector())
