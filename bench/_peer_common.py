"""What every peer of ``bench.peers`` shares: loads, results, pacing and worker processes.

A *load* is what one writer does (``WriteLoad``) or what one reader does
(``ReadLoad``). Every writer and reader runs in its own spawned process, so
the harness measures nothing in its own process and ``W`` writers get ``W``
interpreters, as ``folio perf produce --writers W`` does. ``run_jobs`` starts
the processes, waits until each has said it is ready (connected, subscribed),
starts them all at once and collects their results.

Writers stamp the first 8 bytes of each payload with the send time
(microseconds since the epoch, big-endian, as ``folio perf produce`` does),
so a reader can measure end-to-end latency. Publish latency is measured per
group of events, as in ``folio perf``: from the group's first send to the
acknowledgement of its last, counted once per event of the group.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import queue as queue_module
import signal
import time
from collections.abc import Callable
from typing import Any

from folio.cli._perf_produce import TIMESTAMP_BYTES, ProduceResult
from folio.cli._perf_stats import BYTES_PER_MB, latency_ms, merge_encoded

__all__ = [
    "BYTES_PER_MB",
    "TIMESTAMP_BYTES",
    "Job",
    "ProduceResult",
    "ReadLoad",
    "ReadResult",
    "WriteLoad",
    "filler_bytes",
    "group_size",
    "produce_summary",
    "run_jobs",
    "stamped_payload",
    "wall_us",
]

#: How long workers have to connect and say they are ready.
READY_TIMEOUT_S = 60.0


@dataclasses.dataclass(frozen=True)
class WriteLoad:
    """One writer: ``event_bytes`` events to ``stream`` for ``duration_s``, at ``rate`` or max."""

    endpoint: str
    stream: str
    event_bytes: int
    duration_s: float
    rate: float = 0.0  # events/s of this writer; 0 for as fast as possible
    pipeline: int = 100  # events in flight (Redis: commands per pipeline)


@dataclasses.dataclass(frozen=True)
class ReadLoad:
    """One reader of ``stream``: catch-up from the start, or new events only ("latest").

    It stops at ``max_events`` or once no event came for ``idle_s`` (after
    the first; before the first it waits up to ``first_s``).
    """

    endpoint: str
    stream: str
    start: str  # "earliest" or "latest"
    max_events: int | None = None
    idle_s: float = 2.0
    first_s: float = 60.0


@dataclasses.dataclass(frozen=True)
class ReadResult:
    """What a reader got; ``duration_s`` runs from its first event to its last."""

    events: int
    payload_bytes: int
    duration_s: float
    histogram: bytes  # end-to-end latencies, HdrHistogram.encode()d


def wall_us() -> int:
    """Microseconds since the epoch (the send stamp's clock)."""
    return time.time_ns() // 1000


def stamped_payload(filler: bytes) -> bytes:
    """``filler`` behind an 8-byte send stamp (``filler`` is ``event_bytes - 8`` long)."""
    return wall_us().to_bytes(TIMESTAMP_BYTES, "big") + filler


def group_size(rate: float, largest: int = 16) -> int:
    """Events per latency group (and per paced send): smaller at low rates, as in folio perf."""
    if rate <= 0:
        return largest
    return max(1, min(largest, int(rate // 100)))


def produce_summary(results: list[ProduceResult], event_bytes: int) -> dict[str, Any]:
    """Events/s, MB/s and publish latency of writers that ran side by side."""
    events = sum(result.events for result in results)
    duration_s = max(result.duration_s for result in results)
    errors = [result.error for result in results if result.error]
    return {
        "events_per_s": round(events / duration_s, 1) if duration_s > 0 else 0.0,
        "mb_per_s": round(events * event_bytes / BYTES_PER_MB / duration_s, 3)
        if duration_s > 0 else 0.0,
        "latency_ms": latency_ms(merge_encoded([result.histogram for result in results])),
        "events": events,
        "duration_s": round(duration_s, 3),
        "writers": len(results),
        "errors": sum(result.errors for result in results),
        **({"first_error": errors[0]} if errors else {}),
    }


#: A worker: given its load and a ``ready`` callback (call once connected; it
#: returns when all workers may start), does the work and returns a picklable result.
Job = tuple[Callable[[Any, Callable[[], None]], Any], Any]


def _worker(job: Job, index: int, queue: Any, go: Any) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def ready() -> None:
        queue.put(("ready", index))
        if not go.wait(READY_TIMEOUT_S * 2):
            raise TimeoutError("the other workers did not start")

    function, load = job
    try:
        queue.put(("result", index, function(load, ready)))
    except Exception as error:  # reported to the parent, which raises it
        queue.put(("failed", index, f"{type(error).__name__}: {error}"))


def run_jobs(jobs: list[Job], timeout_s: float) -> list[Any]:
    """Run each job in its own spawned process, started together; their results, in order.

    Raises RuntimeError if a job failed, died, or did not finish within
    ``timeout_s`` of the start.
    """
    context = multiprocessing.get_context("spawn")
    queue: Any = context.Queue()
    go = context.Event()
    processes = [context.Process(target=_worker, args=(job, index, queue, go), daemon=True,
                                 name=f"bench-peer-{index}")
                 for index, job in enumerate(jobs)]
    for process in processes:
        process.start()
    results: dict[int, Any] = {}
    ready = 0
    deadline = time.monotonic() + READY_TIMEOUT_S
    try:
        while len(results) < len(jobs):
            try:
                message = queue.get(timeout=0.5)
            except queue_module.Empty:
                message = None
            if message is None:
                dead = [index for index, process in enumerate(processes)
                        if not process.is_alive() and index not in results]
                if dead:
                    raise RuntimeError(f"bench worker {dead[0]} exited with code "
                                       f"{processes[dead[0]].exitcode} without a result")
            elif message[0] == "ready":
                ready += 1
                if ready == len(jobs):
                    go.set()
                    deadline = time.monotonic() + timeout_s
            elif message[0] == "result":
                results[message[1]] = message[2]
            else:
                raise RuntimeError(f"bench worker {message[1]} failed: {message[2]}")
            if time.monotonic() > deadline:
                what = "finish" if go.is_set() else "get ready"
                raise RuntimeError(f"bench workers did not {what} in time")
    finally:
        go.set()
        for process in processes:
            process.join(timeout=10)
            if process.is_alive():
                process.kill()
                process.join()
    return [results[index] for index in range(len(jobs))]


def filler_bytes(event_bytes: int) -> bytes:
    """Random bytes to follow the send stamp (or the whole payload if it is short)."""
    return os.urandom(max(0, event_bytes - TIMESTAMP_BYTES))
