"""The SDK's Prometheus metrics, in the application's registry.

A ``Client`` takes ``registry=`` (a ``prometheus_client.CollectorRegistry``)
or uses ``prometheus_client``'s default one, so the application's own
``/metrics`` (``start_http_server``, ``make_asgi_app``...) serves them beside
its other metrics. The collectors are made once per registry: every client of
a process shares them, and a second client never registers a name twice.

Names are ``folio_client_*`` (they never collide with a broker's ``folio_*``
in one process). Labels: ``topic`` and the SDK ``error`` class name. The
writer records once per acknowledged block, the reader once per received
response: never per event.

``docs/observability.md`` lists every metric.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram

__all__ = ["ClientMetrics", "TopicMetrics", "client_metrics"]

#: Latency buckets (seconds), as the broker's: 0.25 ms to 10 s.
_LATENCY_BUCKETS_S = (0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                      0.5, 1.0, 2.5, 5.0, 10.0)


class TopicMetrics:
    """The children of one topic: what a writer or reader of it records into."""

    __slots__ = ("_batch_wait_seconds", "_errors", "_read_bytes", "_read_events",
                 "_write_seconds", "_written_bytes", "_written_events")

    def __init__(self, metrics: ClientMetrics, topic: str) -> None:
        self._written_events = metrics.written_events.labels(topic)
        self._written_bytes = metrics.written_bytes.labels(topic)
        self._write_seconds = metrics.write_seconds
        self._batch_wait_seconds = metrics.batch_wait_seconds
        self._read_events = metrics.read_events.labels(topic)
        self._read_bytes = metrics.read_bytes.labels(topic)
        self._errors = metrics.errors

    def acknowledged(self, events: int, data_bytes: int, seconds: float) -> None:
        """A block of ``events`` in ``data_bytes`` was acknowledged ``seconds`` after its cut."""
        self._written_events.inc(events)
        self._written_bytes.inc(data_bytes)
        self._write_seconds.observe(seconds)

    def batched(self, seconds: float) -> None:
        """A block was cut ``seconds`` after its first event joined the batch."""
        self._batch_wait_seconds.observe(seconds)

    def received(self, events: int, data_bytes: int) -> None:
        """A read response delivered ``events`` new events in ``data_bytes`` of blocks
        (a response parsed in one pass counts its framing too: a few bytes a block)."""
        self._read_events.inc(events)
        self._read_bytes.inc(data_bytes)

    def failed(self, error: BaseException) -> None:
        """A block failed, or a read stream ended, with ``error``."""
        self._errors.labels(type(error).__name__).inc()


class ClientMetrics:
    """Every SDK collector, registered in one registry; get it with ``client_metrics``."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.written_events = Counter(
            "folio_client_written_events_total",
            "Events the broker acknowledged to this process's writers, by topic.",
            ["topic"], registry=registry)
        self.written_bytes = Counter(
            "folio_client_written_bytes_total",
            "Bytes of blocks the broker acknowledged to this process's writers, by topic.",
            ["topic"], registry=registry)
        self.write_seconds = Histogram(
            "folio_client_write_seconds",
            "Seconds from cutting a block (its events batched) until the broker acknowledged "
            "it, retries included.",
            buckets=_LATENCY_BUCKETS_S, registry=registry)
        self.batch_wait_seconds = Histogram(
            "folio_client_batch_wait_seconds",
            "Seconds from a block's first event joining its batch until the block was cut "
            "(linger, size, or nothing in flight).",
            buckets=_LATENCY_BUCKETS_S, registry=registry)
        self.read_events = Counter(
            "folio_client_read_events_total",
            "Events this process's readers received, by topic.", ["topic"], registry=registry)
        self.read_bytes = Counter(
            "folio_client_read_bytes_total",
            "Bytes of blocks (and their framing) this process's readers received, by topic.",
            ["topic"],
            registry=registry)
        self.errors = Counter(
            "folio_client_errors_total",
            "Blocks that failed and read streams that ended in error, by SDK error class.",
            ["error"], registry=registry)
        self._topics: dict[str, TopicMetrics] = {}
        self._lock = threading.Lock()

    def for_topic(self, topic: str) -> TopicMetrics:
        """The children of ``topic`` (the same object every time)."""
        with self._lock:
            found = self._topics.get(topic)
            if found is None:
                found = self._topics[topic] = TopicMetrics(self, topic)
            return found


_by_registry: weakref.WeakKeyDictionary[Any, ClientMetrics] = weakref.WeakKeyDictionary()
_by_registry_lock = threading.Lock()


def client_metrics(registry: CollectorRegistry | None = None) -> ClientMetrics:
    """The SDK's collectors in ``registry`` (default: ``prometheus_client.REGISTRY``).

    Made and registered on the first call for a registry; later calls return them.
    """
    target = REGISTRY if registry is None else registry
    with _by_registry_lock:
        found = _by_registry.get(target)
        if found is None:
            found = _by_registry[target] = ClientMetrics(target)
        return found
