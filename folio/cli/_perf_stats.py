"""Latency histograms and report formatting shared by ``folio perf produce`` and ``consume``.

Latencies are recorded in microseconds in an HdrHistogram (3 significant
digits, 1 µs to 1 h) and reported in milliseconds. Throughput is reported in
events/s and MB/s, where a MB is 1,000,000 bytes.
"""

from __future__ import annotations

import sys
from typing import Any

from hdrh.histogram import HdrHistogram

__all__ = [
    "BYTES_PER_MB",
    "HIGHEST_US",
    "format_latency",
    "latency_ms",
    "merge_encoded",
    "new_histogram",
    "print_progress",
    "record_us",
]

BYTES_PER_MB = 1_000_000
#: Largest latency recorded; larger ones are clamped to it.
HIGHEST_US = 3_600_000_000
_SIGNIFICANT_FIGURES = 3


def new_histogram() -> Any:
    """An empty latency histogram in microseconds."""
    return HdrHistogram(1, HIGHEST_US, _SIGNIFICANT_FIGURES)


def record_us(histogram: Any, latency_us: int, count: int = 1) -> None:
    """Record ``count`` latencies of ``latency_us``, clamped to the histogram's range."""
    histogram.record_value(min(max(latency_us, 1), HIGHEST_US), count)


def merge_encoded(encoded: list[bytes]) -> Any:
    """One histogram adding up histograms encoded with ``HdrHistogram.encode()``."""
    merged = new_histogram()
    for payload in encoded:
        merged.add(HdrHistogram.decode(payload))
    return merged


def latency_ms(histogram: Any) -> dict[str, float | None]:
    """``{p50, p99, p999, max}`` in milliseconds; every value None for an empty histogram."""
    if histogram.get_total_count() == 0:
        return {"p50": None, "p99": None, "p999": None, "max": None}

    def ms(value_us: int) -> float:
        return round(value_us / 1000, 3)

    return {
        "p50": ms(histogram.get_value_at_percentile(50.0)),
        "p99": ms(histogram.get_value_at_percentile(99.0)),
        "p999": ms(histogram.get_value_at_percentile(99.9)),
        "max": ms(histogram.get_max_value()),
    }


def format_latency(latency: dict[str, float | None]) -> str:
    """``p50 1.234  p99 ...`` (ms), or ``n/a`` when nothing was recorded."""
    if latency["p50"] is None:
        return "n/a"
    labels = {"p50": "p50", "p99": "p99", "p999": "p99.9", "max": "max"}
    return "  ".join(f"{labels[key]} {latency[key]:.3f}" for key in labels)


def print_progress(prog: str, elapsed_s: float, events: int, what: str) -> None:
    """One progress line to stderr: events so far and their average rate."""
    rate = events / elapsed_s if elapsed_s > 0 else 0.0
    print(f"{prog}: {elapsed_s:5.1f} s  {events:,} events {what}  {rate:,.0f} events/s",
          file=sys.stderr, flush=True)
