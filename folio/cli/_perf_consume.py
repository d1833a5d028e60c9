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
import operator
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
#: Most events taken per call: the clock and the stop conditions are looked at
#: once per list. Under CPython's young-generation threshold (700 objects): a
#: list of 1,024 live events made the cyclic collector run at every list and
#: promote them, full collections included (measured: a third of the loop's CPU).
_MAX_EVENTS = 500
_payload = operator.attrgetter("payload")


def _read_one_by_one(read_next: Callable[[float | None], Any]
                     ) -> Callable[[int, float], list[Any]]:
    """``read_many`` made of ``read_next`` calls (``--read-next``): the first event waited
    for, then those already there (``read_next(0)``), up to the count."""

    def read(max_events: int, timeout: float) -> list[Any]:
        event = read_next(timeout)
        got = []
        while event is not None:
            got.append(event)
            if len(got) >= max_events:
                break
            event = read_next(0)
        return got

    return read


@dataclasses.dataclass(frozen=True)
class ConsumeConfig:
    """What the reader does."""

    topic: str
    start: Literal["earliest", "latest"]
    duration_s: float | None = None
    max_events: int | None = None
    idle_timeout_s: float | None = None  # counted from the last event, once one came
    #: Read one event per call (``read_next``) rather than lists (``read_many``).
    read_next: bool = False


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
        read = _read_one_by_one(reader.read_next) if config.read_next else reader.read_many
        try:
            while True:
                now = clock()
                left = None if config.max_events is None else config.max_events - events
                if left is not None and left <= 0:
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
                got = read(_MAX_EVENTS if left is None else min(left, _MAX_EVENTS), _POLL_S)
                if not got:
                    continue
                if first_at is None:
                    first_at = clock()
                # The bytes counted in C; the samples are the events whose count
                # (events before them, plus one) is a multiple of SAMPLE_EVERY.
                total_bytes += sum(map(len, map(_payload, got)))
                for event in got[(-events - 1) % SAMPLE_EVERY::SAMPLE_EVERY]:
                    payload = event.payload
                    if len(payload) >= _TIMESTAMP_BYTES:
                        latency_us = wall_us() // 1000 - int.from_bytes(
                            payload[:_TIMESTAMP_BYTES], "big")
                        if -_PLAUSIBLE_US < latency_us < _PLAUSIBLE_US:
                            record_us(histogram, latency_us, SAMPLE_EVERY)
                events += len(got)
                last_at = clock()
        except KeyboardInterrupt:
            stopped_by = "interrupted"
    duration_s = last_at - (first_at if first_at is not None and events > 1 else start)
    return ConsumeResult(events, total_bytes, duration_s, histogram, stopped_by)
