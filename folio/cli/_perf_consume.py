"""The read loop of ``folio perf consume``: one reader, events/s, MB/s and end-to-end latency.

End-to-end latency is measured on events whose first 8 bytes are a send time
written by ``folio perf produce`` (microseconds since the epoch, big-endian),
sampled on one event in ``SAMPLE_EVERY`` (recorded with that weight) so the
loop stays cheap; a value more than an hour off the local clock is taken as
not being a timestamp. It compares two processes' wall clocks, so it is only
meaningful on one machine or with well-synchronized clocks.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any, Literal

import folio
from folio.cli._perf_stats import new_histogram, record_us

__all__ = ["SAMPLE_EVERY", "ConsumeConfig", "ConsumeResult", "run_consume"]

SAMPLE_EVERY = 16
_TIMESTAMP_BYTES = 8
_PLAUSIBLE_US = 3_600_000_000
#: Longest single wait for an event, so that ticks and Ctrl-C are timely.
_POLL_S = 0.2


@dataclasses.dataclass(frozen=True)
class ConsumeConfig:
    """What the reader does."""

    topic: str
    start: Literal["earliest", "latest"]
    duration_s: float | None = None
    max_events: int | None = None
    idle_timeout_s: float | None = None  # counted from the last event, once one came


@dataclasses.dataclass
class ConsumeResult:
    """What the reader achieved; ``duration_s`` runs from the first event to the last."""

    events: int
    payload_bytes: int
    duration_s: float
    histogram: Any
    stopped_by: str


def run_consume(client: folio.Client, config: ConsumeConfig,
                tick: Callable[[float, int], bool] | None = None) -> ConsumeResult:
    """Read until ``max_events``, ``duration_s`` or ``idle_timeout_s``, and measure.

    Args:
        client: the client to read with.
        config: what to read and when to stop.
        tick: called about once a second with the seconds since the start and
            the events read; when it returns True reading stops.
    """
    histogram = new_histogram()
    clock = time.monotonic
    wall_us = time.time_ns
    events = 0
    total_bytes = 0
    start = clock()
    deadline = None if config.duration_s is None else start + config.duration_s
    next_tick = start + 1.0
    first_at: float | None = None
    last_at = start
    stopped_by = "interrupted"
    with client.reader(config.topic, start=config.start) as reader:
        read_next = reader.read_next
        try:
            while True:
                now = clock()
                if config.max_events is not None and events >= config.max_events:
                    stopped_by = "max-events"
                    break
                if deadline is not None and now >= deadline:
                    stopped_by = "duration"
                    break
                if (config.idle_timeout_s is not None and first_at is not None
                        and now - last_at >= config.idle_timeout_s):
                    stopped_by = "idle"
                    break
                if now >= next_tick:
                    next_tick += 1.0
                    if tick is not None and tick(now - start, events):
                        break
                event = read_next(timeout=_POLL_S)
                if event is None:
                    continue
                if first_at is None:
                    first_at = clock()
                # Drain what is already there without looking at the clock per event.
                while event is not None:
                    payload = event.payload
                    events += 1
                    total_bytes += len(payload)
                    if events % SAMPLE_EVERY == 0 and len(payload) >= _TIMESTAMP_BYTES:
                        latency_us = wall_us() // 1000 - int.from_bytes(
                            payload[:_TIMESTAMP_BYTES], "big")
                        if -_PLAUSIBLE_US < latency_us < _PLAUSIBLE_US:
                            record_us(histogram, latency_us, SAMPLE_EVERY)
                    if config.max_events is not None and events >= config.max_events:
                        break
                    if events % 1024 == 0:
                        break  # look at the clock now and then
                    event = read_next(timeout=0)
                last_at = clock()
        except KeyboardInterrupt:
            stopped_by = "interrupted"
    duration_s = last_at - (first_at if first_at is not None and events > 1 else start)
    return ConsumeResult(events, total_bytes, duration_s, histogram, stopped_by)
