"""Folio's latency budget for ``bench.peers``: one event's path, stage by stage.

The stages are Prometheus histograms Folio keeps anyway (docs/observability.md,
"The latency budget"): the SDK's in the writer's process, the broker's and the
bookie's in ``folio standalone``'s ``/metrics``. ``scrape`` reads the
server's before and after an end-to-end run, ``delta`` keeps what that run
added, and ``summary`` gives each stage's count, mean and p50/p99 estimated
from the buckets (linear within a bucket, as Prometheus's
``histogram_quantile``; a quantile in the last finite bucket or above says
the bucket's bound).

What each stage is, in path order (``STAGES``):

* ``sdk_batch_wait``: an event's block, from its first event joining the batch
  to the cut (per block);
* ``sdk_send_to_ack``: from the cut to the broker's acknowledgement, which
  holds every server stage below plus two network trips;
* ``broker_append``: a segment took the append until it was durable;
* ``ledger_add``: the ledger client's add request until the bookie answered;
* ``journal_wait``: a group commit's oldest add waited in the bookie's queue;
* ``fsync``: the group commit's journal ``pwritev`` + ``fdatasync``;
* ``ack``: the group commit's results handed to the event loop (a thread hop);
* ``reader_wake``: a Read stream waiting at the tail ran after the end moved;
* ``end_to_end``: send stamp to the reading application (the benchmark's own).

The stages overlap (``sdk_send_to_ack`` holds ``broker_append``, which holds
``ledger_add``, which holds ``journal_wait``, ``fsync`` and ``ack``); the
report adds ``rest_of_path_ms``: the end-to-end mean less batch wait, send to
ack and reader wake, i.e. the reader's read, its trip back and the SDK's
unpacking (taking the acknowledgement's return trip for the event's forward
one).
"""

from __future__ import annotations

import math
import urllib.request
from typing import Any

from prometheus_client import REGISTRY, generate_latest
from prometheus_client.parser import text_string_to_metric_families

__all__ = ["SERVER_STAGES", "STAGES", "client_stages", "delta", "scrape", "summary"]

#: Stage name -> histogram (without ``_bucket``), in path order.
SDK_STAGES = {"sdk_batch_wait": "folio_client_batch_wait_seconds",
              "sdk_send_to_ack": "folio_client_write_seconds"}
SERVER_STAGES = {"broker_append": "folio_append_seconds",
                 "ledger_add": "folio_ledger_add_seconds",
                 "journal_wait": "folio_bookie_journal_wait_seconds",
                 "fsync": "folio_bookie_fsync_seconds",
                 "ack": "folio_bookie_ack_seconds",
                 "reader_wake": "folio_read_wake_seconds"}
STAGES = (*SDK_STAGES, *SERVER_STAGES, "end_to_end")

#: A histogram: cumulative counts by upper bound (ascending, +Inf last), its sum.
Histogram = dict[str, Any]


def _histograms(text: str, names: set[str]) -> dict[str, Histogram]:
    found: dict[str, Histogram] = {}
    for family in text_string_to_metric_families(text):
        if family.name not in names:
            continue
        buckets: dict[float, float] = {}
        total = 0.0
        for sample in family.samples:
            if sample.name.endswith("_bucket"):
                bound = float(sample.labels["le"])
                buckets[bound] = buckets.get(bound, 0.0) + sample.value
            elif sample.name.endswith("_sum"):
                total += sample.value
        found[family.name] = {"buckets": sorted(buckets.items()), "sum": total}
    return found


def scrape(metrics_url: str) -> dict[str, Histogram]:
    """The server stages' histograms as ``metrics_url`` serves them now."""
    with urllib.request.urlopen(metrics_url, timeout=10) as response:
        text = response.read().decode()
    return _histograms(text, set(SERVER_STAGES.values()))


def client_stages() -> dict[str, Histogram]:
    """The SDK stages' histograms in this process's default registry (a writer job's)."""
    return _histograms(generate_latest(REGISTRY).decode(), set(SDK_STAGES.values()))


def delta(before: dict[str, Histogram], after: dict[str, Histogram]) -> dict[str, Histogram]:
    """What was observed between two scrapes."""
    out: dict[str, Histogram] = {}
    for name, later in after.items():
        earlier = before.get(name, {"buckets": [], "sum": 0.0})
        previous = dict(earlier["buckets"])
        out[name] = {"buckets": [(bound, count - previous.get(bound, 0.0))
                                 for bound, count in later["buckets"]],
                     "sum": later["sum"] - earlier["sum"]}
    return out


def _quantile(buckets: list[tuple[float, float]], q: float) -> float | None:
    total = buckets[-1][1] if buckets else 0.0
    if total <= 0:
        return None
    rank = q * total
    lower, below = 0.0, 0.0
    finite = [bound for bound, _ in buckets if not math.isinf(bound)]
    for bound, count in buckets:
        if count >= rank:
            if math.isinf(bound):
                return finite[-1] if finite else None
            inside = count - below
            return lower + (bound - lower) * ((rank - below) / inside if inside else 1.0)
        lower, below = bound, count
    return finite[-1] if finite else None


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 3)


def summary(histogram: Histogram | None) -> dict[str, Any]:
    """count, mean_ms, p50_ms, p99_ms of a (delta) histogram."""
    if not histogram or not histogram["buckets"]:
        return {"count": 0, "mean_ms": None, "p50_ms": None, "p99_ms": None}
    buckets = histogram["buckets"]
    count = buckets[-1][1]
    return {"count": int(count),
            "mean_ms": _ms(histogram["sum"] / count) if count else None,
            "p50_ms": _ms(_quantile(buckets, 0.5)),
            "p99_ms": _ms(_quantile(buckets, 0.99))}


def budget(client: dict[str, Histogram], server: dict[str, Histogram],
           end_to_end_ms: dict[str, Any]) -> dict[str, Any]:
    """Every stage's summary (``STAGES`` order) and the rest of the path's mean."""
    stages: dict[str, Any] = {}
    for stage, name in SDK_STAGES.items():
        stages[stage] = summary(client.get(name))
    for stage, name in SERVER_STAGES.items():
        stages[stage] = summary(server.get(name))
    stages["end_to_end"] = {"count": None, "mean_ms": end_to_end_ms.get("mean"),
                            "p50_ms": end_to_end_ms.get("p50"),
                            "p99_ms": end_to_end_ms.get("p99")}
    parts = [stages[name]["mean_ms"] for name in ("sdk_batch_wait", "sdk_send_to_ack",
                                                  "reader_wake")]
    total = stages["end_to_end"]["mean_ms"]
    rest = None if total is None or None in parts else round(
        total - sum(part for part in parts if part is not None), 3)
    return {"stages": stages, "rest_of_path_ms": rest}
