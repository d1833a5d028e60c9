"""Catch-up consume alone: one reader reading a topic's backlog from the start, repeated.

``bench.peers`` measures catch-up consume once per event size, after a
produce run; this is the narrow version for profiling and before/after
comparisons. It starts ``folio standalone`` (or uses ``--endpoint``), writes
``--events`` events of each size into a topic of one segment once (no key,
as ``folio perf produce`` writes them), then reads each backlog from the
start ``--repeat`` times with ``folio perf consume``'s loop
(``folio.cli._perf_consume.run_consume``, which ``bench.peers`` uses too),
once with ``read_many`` and once with ``read_next`` per round (``--api``),
each read in a fresh process so that a client-side change is measured as
imported by that process. It prints one line per read (events/s, MB/s, the
reader's CPU per event during the read, all threads and the caller's, and
how long the caller's thread waited for a CPU) and the median::

    python -m bench.catchup --sizes 100,1024 --events 300000 --repeat 5

``--read-only --endpoint HOST:PORT --topic-prefix P`` reads topics written
by an earlier run against the same broker (e.g. to alternate clients of two
versions against one broker in the same minute).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import folio
from bench._standalone import start_standalone
from folio.cli._perf_consume import ConsumeConfig, run_consume

__all__ = ["main"]

_MB = 1_000_000


def _write(endpoint: str, topic: str, size: int, events: int) -> None:
    payload = bytes(size)
    with folio.Client(endpoint) as client:
        client.create_topic(topic, 1)
        with client.writer(topic) as writer:
            write = writer.write_event
            for _ in range(events):
                write(payload)
            writer.flush()


def _run_delay_s() -> float:
    """Seconds this thread has waited for a CPU while runnable (Linux schedstat; else 0)."""
    try:
        with open("/proc/thread-self/schedstat") as stats:
            return int(stats.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def _read(endpoint: str, topic: str, events: int, read_next: bool) -> dict[str, float]:
    with folio.Client(endpoint) as client:
        cpu, main_cpu, delay = time.process_time(), time.thread_time(), _run_delay_s()
        result = run_consume(client, ConsumeConfig(topic=topic, start="earliest",
                                                   max_events=events, read_next=read_next))
        cpu, main_cpu = time.process_time() - cpu, time.thread_time() - main_cpu
        delay = _run_delay_s() - delay
    # CPU of the read alone (the interpreter's start and imports left out): every
    # thread's, the caller's thread's, and how long the caller's thread was
    # runnable but had no CPU (on a loaded machine, most of a read's wall time).
    return {"events": result.events, "bytes": result.payload_bytes,
            "duration_s": result.duration_s, "cpu_s": cpu, "main_cpu_s": main_cpu,
            "run_delay_s": delay}


def _read_in_process(endpoint: str, topic: str, events: int, api: str) -> dict[str, float]:
    """One read in a fresh interpreter (``python -m bench.catchup --child``)."""
    out = subprocess.run(
        [sys.executable, "-m", "bench.catchup", "--child", "--endpoint", endpoint,
         "--topic-prefix", topic, "--events", str(events), "--api", api],
        check=True, capture_output=True, text=True)
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


_API_NAMES = {"many": "read_many", "next": "read_next"}


def _report(size: int, api: str, result: dict[str, float]) -> float:
    """Print one read's line; its events/s."""
    seconds = result["duration_s"]
    rate = result["events"] / seconds if seconds > 0 else 0.0
    per_event_us = 1e6 / max(result["events"], 1)
    print(f"{size} B, {_API_NAMES[api]}: read {int(result['events']):,} events in "
          f"{seconds:.2f} s: {rate:,.0f} events/s, "
          f"{rate * result['bytes'] / max(result['events'], 1) / _MB:.1f} MB/s; "
          f"reader CPU {result['cpu_s'] * per_event_us:.2f} us/event (caller's "
          f"thread {result['main_cpu_s'] * per_event_us:.2f}), which waited "
          f"{result['run_delay_s']:.2f} s for a CPU "
          f"(load {os.getloadavg()[0]:.2f})", flush=True)
    return rate


def main(argv: list[str] | None = None) -> int:
    """Parse options, write the backlogs (unless ``--read-only``), read them, print."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.catchup",
        description="Catch-up consume: write a backlog of N events per size into a "
        "one-segment topic, then read it from the start R times (each in a fresh "
        "process) and print events/s and MB/s per read and their median.")
    parser.add_argument("--sizes", default="100,1024",
                        help="event sizes in bytes, comma-separated (default 100,1024)")
    parser.add_argument("--events", type=int, default=300_000,
                        help="events per backlog (default 300000)")
    parser.add_argument("--repeat", type=int, default=3,
                        help="reads of each backlog (default 3)")
    parser.add_argument("--endpoint", default=None,
                        help="an existing broker (default: start folio standalone, sync)")
    parser.add_argument("--topic-prefix", default="catchup",
                        help="topics are PREFIX-SIZE (default catchup)")
    parser.add_argument("--read-only", action="store_true",
                        help="read backlogs written by an earlier run (needs --endpoint)")
    parser.add_argument("--api", default="many,next",
                        help="the reader's calls, comma-separated, each read of a round with "
                        "each: many (read_many, up to 500 events per call) or next "
                        "(read_next, one per call) (default many,next)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    apis = [api for api in args.api.split(",") if api]
    if not apis or any(api not in ("many", "next") for api in apis):
        parser.error(f"--api takes many and/or next, not {args.api!r}")
    if args.child:
        print(json.dumps(_read(args.endpoint, args.topic_prefix, args.events,
                               read_next=apis == ["next"])))
        return 0
    if args.read_only and args.endpoint is None:
        parser.error("--read-only needs --endpoint")
    sizes = [int(size) for size in args.sizes.split(",") if size]
    process = None
    base = None
    endpoint = args.endpoint
    if endpoint is None:
        base = Path(tempfile.mkdtemp(prefix="folio-bench-catchup-"))
        process, endpoint = start_standalone(base / "data")
    try:
        print(f"broker {endpoint}, load average {os.getloadavg()[0]:.2f}", flush=True)
        for size in sizes:
            topic = f"{args.topic_prefix}-{size}"
            if not args.read_only:
                started = time.monotonic()
                _write(endpoint, topic, size, args.events)
                print(f"{size} B: wrote {args.events:,} events in "
                      f"{time.monotonic() - started:.1f} s", flush=True)
            rates: dict[str, list[float]] = {api: [] for api in apis}
            for _ in range(args.repeat):
                for api in apis:  # alternating, so that the load moves both alike
                    rates[api].append(_report(size, api, _read_in_process(
                        endpoint, topic, args.events, api)))
            for api, api_rates in rates.items():
                median = statistics.median(api_rates)
                print(f"{size} B, {_API_NAMES[api]}: median {median:,.0f} events/s, "
                      f"{median * size / _MB:.1f} MB/s", flush=True)
    finally:
        if process is not None:
            process.terminate()
            process.wait()
        if base is not None:
            shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
