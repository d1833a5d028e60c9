"""The ledger service's Prometheus metrics: every collector of the ``ledger`` package.

Registered in ``prometheus_client``'s default registry at import, named
``folio_bookie_*`` (what a bookie's store does) and ``folio_ledger_*`` (what a
ledger client, i.e. the broker, sees). Every figure is updated once per group
commit or once per add request, never per entry; gauges that describe state
(ledgers held, ledgers open) are computed when Prometheus scrapes, from the
objects registered with ``watch_storage`` and ``watch_writer``.

``docs/observability.md`` lists every metric with its meaning.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from typing import Protocol

from prometheus_client import REGISTRY, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

__all__ = [
    "ADD_SECONDS",
    "LATENCY_BUCKETS_S",
    "observe_ack",
    "observe_add",
    "observe_gc_collected",
    "observe_gc_pass",
    "observe_group_commit",
    "observe_journal_wait",
    "observe_rereplicated",
    "set_under_replicated",
    "watch_storage",
    "watch_writer",
]

#: Latency buckets (seconds) shared by every Folio latency histogram: 0.25 ms to 10 s.
LATENCY_BUCKETS_S = (0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                     0.5, 1.0, 2.5, 5.0, 10.0)

_ENTRY_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000)
_BYTE_BUCKETS = tuple(float(1024 * 4**i) for i in range(10))  # 1 KiB .. 256 MiB

GROUP_COMMIT_ENTRIES = Histogram(
    "folio_bookie_group_commit_entries",
    "Entries written by one group commit of a bookie (one RocksDB WriteBatch).",
    buckets=_ENTRY_BUCKETS,
)
GROUP_COMMIT_BYTES = Histogram(
    "folio_bookie_group_commit_bytes",
    "Bytes of entry data written by one group commit of a bookie.",
    buckets=_BYTE_BUCKETS,
)
FSYNC_SECONDS = Histogram(
    "folio_bookie_fsync_seconds",
    "Seconds one group commit's durable write took: the journal's pwritev and fdatasync "
    "(or, with journal = none, RocksDB's write and its WAL sync); observed under sync "
    "durability only.",
    buckets=LATENCY_BUCKETS_S,
)
JOURNAL_WAIT_SECONDS = Histogram(
    "folio_bookie_journal_wait_seconds",
    "Seconds the oldest add of a group commit waited in the bookie's queue before its "
    "group commit began (the previous commit's write and sync, and nothing else: the "
    "writer takes whatever is queued, up to max_batch_bytes, without a timer).",
    buckets=LATENCY_BUCKETS_S,
)
ACK_SECONDS = Histogram(
    "folio_bookie_ack_seconds",
    "Seconds from a group commit's end (durable) until its results were handed to the "
    "waiting event loop's futures: one thread hop per loop and group commit.",
    buckets=LATENCY_BUCKETS_S,
)
ADDED_ENTRIES = Counter(
    "folio_bookie_added_entries_total", "Entries a bookie made durable.")
ADDED_BYTES = Counter(
    "folio_bookie_added_bytes_total", "Bytes of entry data a bookie made durable.")
ADD_SECONDS = Histogram(
    "folio_ledger_add_seconds",
    "Seconds from sending an add request (a run of entries) to one bookie until it "
    "answered, as the ledger client sees it.",
    buckets=LATENCY_BUCKETS_S,
)


STORAGE_ERRORS = Counter(
    "folio_storage_errors_total",
    "Failed writes to a bookie's storage (disk full, data dir read-only, RocksDB I/O error)")
STORAGE_FAILED = Gauge(
    "folio_storage_failed",
    "1 while a bookie's storage refuses writes after a failure (it probes and recovers by "
    "itself once the disk takes writes again), else 0")


UNDER_REPLICATED_LEDGERS = Gauge(
    "folio_ledger_under_replicated_ledgers",
    "Ledgers marked under-replicated in the cluster (a bookie of theirs is lost for good), "
    "as this process's auto-recovery worker last counted them; 0 once re-replication "
    "restored every write quorum")
REREPLICATED_ENTRIES = Counter(
    "folio_ledger_rereplicated_entries_total",
    "Entries this process's auto-recovery worker copied to a replacement bookie")
REREPLICATED_BYTES = Counter(
    "folio_ledger_rereplicated_bytes_total",
    "Bytes of entry data this process's auto-recovery worker copied to replacement bookies")


GC_LEDGERS = Counter(
    "folio_bookie_gc_ledgers",
    "Ledgers this bookie's garbage collector deleted: reason=deleted (gone from the metadata) "
    "or over_replicated (closed, and no ensemble names this bookie)",
    ["reason"])
GC_BYTES = Counter(
    "folio_bookie_gc_bytes",
    "Bytes of entry data of the ledgers this bookie's garbage collector deleted (from the "
    "stored lengths of the first and last entry held)")
GC_PASSES = Counter(
    "folio_bookie_gc_passes",
    "Passes of this bookie's garbage collector: result=done, or failed (an unknown metadata "
    "answer ended it early and nothing more was deleted)",
    ["result"])


def observe_gc_collected(reason: str, data_bytes: int) -> None:
    """The garbage collector deleted one ledger (``reason``) of ``data_bytes``."""
    GC_LEDGERS.labels(reason).inc()
    GC_BYTES.inc(data_bytes)


def observe_gc_pass(*, failed: bool) -> None:
    """One pass of the garbage collector ended."""
    GC_PASSES.labels("failed" if failed else "done").inc()


def set_under_replicated(ledgers: int) -> None:
    """The number of under-replicated ledgers the auto-recovery worker sees now."""
    UNDER_REPLICATED_LEDGERS.set(ledgers)


def observe_rereplicated(entries: int, data_bytes: int) -> None:
    """An auto-recovery worker copied ``entries`` (``data_bytes``) and swapped the bookie in."""
    REREPLICATED_ENTRIES.inc(entries)
    REREPLICATED_BYTES.inc(data_bytes)


def observe_storage_failure() -> None:
    """A write to a bookie's storage failed: it refuses writes until a probe succeeds."""
    STORAGE_ERRORS.inc()
    STORAGE_FAILED.set(1)


def observe_storage_recovered() -> None:
    """A bookie's storage takes writes again."""
    STORAGE_FAILED.set(0)


def observe_group_commit(entries: int, data_bytes: int, write_s: float | None) -> None:
    """Record one group commit: its entries, their bytes, its write time (None: not synced).

    A commit of fences and deletes only (no entries) counts for its write time alone.
    """
    if entries:
        GROUP_COMMIT_ENTRIES.observe(entries)
        GROUP_COMMIT_BYTES.observe(data_bytes)
        ADDED_ENTRIES.inc(entries)
        ADDED_BYTES.inc(data_bytes)
    if write_s is not None:
        FSYNC_SECONDS.observe(write_s)


def observe_journal_wait(seconds: float) -> None:
    """Record how long a group commit's oldest add waited in the queue."""
    JOURNAL_WAIT_SECONDS.observe(seconds)


def observe_ack(seconds: float) -> None:
    """Record one hand-over of a group commit's results to an event loop."""
    ACK_SECONDS.observe(seconds)


def observe_add(seconds: float) -> None:
    """Record one add request's round trip to one bookie."""
    ADD_SECONDS.observe(seconds)


class _Storage(Protocol):
    def ledger_ids(self) -> list[int]: ...


class _Writer(Protocol):
    @property
    def is_closed(self) -> bool: ...


_storages: weakref.WeakSet[_Storage] = weakref.WeakSet()
_writers: weakref.WeakSet[_Writer] = weakref.WeakSet()


def watch_storage(storage: _Storage) -> None:
    """Count ``storage``'s ledgers (a ``Bookie``) in ``folio_bookie_ledgers`` while it lives."""
    _storages.add(storage)


def watch_writer(handle: _Writer) -> None:
    """Count ``handle`` in ``folio_ledger_open_ledgers`` until it is closed (or collected)."""
    _writers.add(handle)


class _StateCollector(Collector):
    """Gauges computed at scrape time (no work on the write path)."""

    def describe(self) -> Iterable[Metric]:
        return self._families(with_values=False)

    def collect(self) -> Iterable[Metric]:
        return self._families(with_values=True)

    @staticmethod
    def _families(*, with_values: bool) -> list[Metric]:
        held = GaugeMetricFamily(
            "folio_bookie_ledgers", "Ledgers a bookie of this process holds entries or "
            "state for.")
        opened = GaugeMetricFamily(
            "folio_ledger_open_ledgers", "Ledgers this process created for writing and has "
            "not closed.")
        if with_values:
            # Copies first: the sets may change under the scraping thread.
            held.add_metric([], sum(len(storage.ledger_ids()) for storage in list(_storages)))
            opened.add_metric([], sum(1 for handle in list(_writers) if not handle.is_closed))
        return [held, opened]


REGISTRY.register(_StateCollector())
