"""The SDK workload of ``bench.failover``: one writer thread per segment, acknowledgement times.

``SegmentLoad`` runs one exactly-once ``EventWriter`` (one client, one writer
id) and a thread per segment that writes numbered events with a routing key
of that segment (payload ``<segment>:<n>``), keeping up to ``window``
unacknowledged, so each segment's progress is independent of the others'.
Each acknowledgement's time is recorded (from the write future's callback);
``longest_gap`` is the longest time between two acknowledgements of a segment
within a window of time (a stall: the segment's writes stopped), counting from
the last acknowledgement before it. Every failed write is kept: with
transient failures retried, none should reach the application.

``check`` reads every segment back to its end offset and compares it with
what was written: each event once, in order; an event whose write failed
(outcome unknown) may be there or not, and is reported.
"""

from __future__ import annotations

import bisect
import collections
import itertools
import threading
import time
from collections.abc import Sequence

import grpc

import folio
from bench._cluster_client import read_segment
from folio.api.v1.routing import segment_index

__all__ = ["SegmentLoad", "percentile"]


def percentile(values: Sequence[float], fraction: float) -> float:
    """The ``fraction`` percentile of ``values`` (nearest rank); 0 for none."""
    ordered = sorted(values)
    if not ordered:
        return 0.0
    rank = min(len(ordered) - 1, max(0, round(fraction * len(ordered) + 0.5) - 1))
    return ordered[rank]


def keys_by_segment(client: folio.Client, topic: str) -> dict[str, str]:
    """One routing key per open segment of ``topic``."""
    segments = sorted((s for s in client.get_segments(topic) if not s.sealed),
                      key=lambda s: s.key_low)
    highs = [s.key_high for s in segments]
    chosen: dict[str, str] = {}
    n = 0
    while len(chosen) < len(segments):
        key = f"key-{n}"
        n += 1
        chosen.setdefault(segments[segment_index(highs, key)].name, key)
    return chosen


class SegmentLoad:
    """Writers of every segment of ``topic`` through ``endpoint`` (see the module docstring)."""

    def __init__(self, endpoint: str, topic: str, *, window: int = 4) -> None:
        self._client = folio.Client(endpoint, timeout_s=60)
        self._keys = keys_by_segment(self._client, topic)
        self._writer = self._client.writer(topic, linger_ms=1, writer_id="bench-failover")
        self._window = window
        self._lock = threading.Lock()
        #: Per segment: acknowledgement times (``time.monotonic()``), in order.
        self.acks: dict[str, list[float]] = {segment: [] for segment in self._keys}
        #: Per segment: how many events were written (numbers 0..written-1).
        self.written: dict[str, int] = dict.fromkeys(self._keys, 0)
        #: (segment, number, error) of every write that failed.
        self.failures: list[tuple[str, int, BaseException]] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(segment, key), daemon=True)
                         for segment, key in self._keys.items()]
        for thread in self._threads:
            thread.start()

    @property
    def segments(self) -> list[str]:
        return list(self._keys)

    def _run(self, segment: str, key: str) -> None:
        pending: collections.deque[folio.WriteFuture] = collections.deque()
        acks = self.acks[segment]
        n = 0
        while not self._stop.is_set():
            future = self._writer.write_event(f"{segment}:{n}".encode(), routing_key=key)

            def done(future: folio.WriteFuture, number: int = n) -> None:
                error = future.exception(0)
                with self._lock:
                    if error is None:
                        acks.append(time.monotonic())
                    else:
                        self.failures.append((segment, number, error))

            future.add_done_callback(done)
            n += 1
            self.written[segment] = n
            pending.append(future)
            while len(pending) >= self._window or (pending and pending[0].done()):
                pending.popleft().exception(None)  # waits; the callback keeps the outcome

    def acked_after(self, segment: str, since: float) -> int:
        """Acknowledgements of ``segment`` later than ``since``."""
        with self._lock:
            times = self.acks[segment]
            return len(times) - bisect.bisect_right(times, since)

    def longest_gap(self, segment: str, start: float, end: float) -> float:
        """The longest time without an acknowledgement of ``segment`` within ``[start, end]``.

        Counted from the last acknowledgement before ``start`` (the stall a
        fault at ``start`` caused began there).
        """
        with self._lock:
            times = list(self.acks[segment])
        first = bisect.bisect_right(times, start)
        points = times[max(0, first - 1):bisect.bisect_right(times, end)]
        if not points:
            return end - start
        gaps = [later - earlier for earlier, later in itertools.pairwise(points)]
        gaps.append(end - points[-1])
        return max(gaps)

    def stop(self) -> None:
        """Stops writing, waits for every outcome, closes the writer and the client."""
        self._stop.set()
        for thread in self._threads:
            thread.join(300)
        self._writer.close(300)
        self._client.close()

    def check(self, brokers: Sequence[str]) -> tuple[int, list[str]]:
        """Reads each segment back to its end: (events stored, problems found)."""
        failed = {(segment, number) for segment, number, _ in self.failures}
        problems: list[str] = []
        stored = 0
        for segment in self._keys:
            payloads = _read_back(brokers, segment)
            stored += len(payloads)
            numbers = [int(p.decode().rsplit(":", 1)[1]) for p in payloads]
            doubled = len(numbers) - len(set(numbers))
            if doubled:
                problems.append(f"{segment}: {doubled} events stored twice")
            if numbers != sorted(numbers):
                problems.append(f"{segment}: events out of order")
            missing = set(range(self.written[segment])) - set(numbers) - {
                n for s, n in failed if s == segment}
            if missing:
                problems.append(f"{segment}: {len(missing)} acknowledged events missing")
        return stored, problems


def _read_back(brokers: Sequence[str], segment: str, timeout_s: float = 60.0) -> list[bytes]:
    """``read_segment``, asked again while the segment moves (WrongHost, a broker away)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return read_segment(brokers, segment)
        except grpc.RpcError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
