"""SDK memory benchmark: what 1,000 idle writers cost one client, measured with ``tracemalloc``.

Run ``python -m bench.sdk_memory [--writers 1000] [--segments 100] [--json]``
against ``--endpoint HOST:PORT``, or without it against a ``folio standalone``
it starts on free ports (and stops) itself. One client makes ``--writers``
writers of one topic of ``--segments`` segments, in two phases, each measured
as Python memory traced since just before the first writer, divided by the
number of writers:

* ``created``: the writers exist and have written nothing.
* ``idle``: each writer then wrote ``--keys-per-writer`` keyed events (so it
  holds that many segment flows, set up on the client's pooled channels) and
  was flushed: every block is acknowledged, nothing is buffered. This is the
  figure the target (<= 10 KiB per idle writer beyond its buffers) is about.

``tracemalloc`` sees Python allocations only; gRPC's C core (the channels,
shared by every writer) is not counted, and does not grow with writers.
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import tempfile
import time
import tracemalloc
import uuid
from pathlib import Path
from typing import Any

import folio
from bench._standalone import start_standalone

__all__ = ["main", "run"]

#: The target: bytes per idle writer beyond its buffers.
TARGET_BYTES_PER_WRITER = 10 * 1024


def _traced() -> int:
    gc.collect()
    return tracemalloc.get_traced_memory()[0]


def run(endpoint: str, writers: int, segments: int, keys_per_writer: int,
        progress: bool = False) -> dict[str, Any]:
    """Measures both phases against ``endpoint``; returns the report as a dict."""
    topic = f"sdk-memory-{uuid.uuid4().hex[:8]}"
    with folio.Client(endpoint, timeout_s=60) as client:
        client.create_topic(topic, segments)
        made: list[folio.EventWriter[bytes]] = []
        tracemalloc.start()
        try:
            before = _traced()
            started = time.monotonic()
            made.extend(client.writer(topic, linger_ms=1.0) for _ in range(writers))
            created = _traced()
            if progress:
                print(f"{writers} writers made in {time.monotonic() - started:.1f} s",
                      file=sys.stderr, flush=True)
            futures = [writer.write_event(b"x" * 32, f"w{n}-k{k}")
                       for n, writer in enumerate(made) for k in range(keys_per_writer)]
            for writer in made:
                writer.flush(timeout=60)
            failed = sum(1 for future in futures if future.exception(timeout=0) is not None)
            del futures
            idle = _traced()
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        stats = client.pool_stats() if hasattr(client, "pool_stats") else None
        flows = sum(c.flows for c in stats.connections) if stats is not None else None
        connections = len(stats.connections) if stats is not None else None
        for writer in made:
            writer.close(timeout=60)
        client.delete_topic(topic)
    per_created = (created - before) / writers
    per_idle = (idle - before) / writers
    return {
        "writers": writers,
        "segments": segments,
        "keys_per_writer": keys_per_writer,
        "failed_writes": failed,
        "bytes_per_writer_created": round(per_created),
        "bytes_per_writer_idle": round(per_idle),
        "peak_bytes_during_writes": peak - before,
        "target_bytes_per_writer": TARGET_BYTES_PER_WRITER,
        "within_target": per_idle <= TARGET_BYTES_PER_WRITER and failed == 0,
        "pool_connections": connections,
        "pool_flows": flows,
    }


def main(argv: list[str] | None = None) -> int:
    """The command line; exit status 1 when the target is missed."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.sdk_memory",
        description="Python memory per idle EventWriter of one client (tracemalloc).")
    parser.add_argument("--endpoint", help="a running broker; default: start a standalone")
    parser.add_argument("--writers", type=int, default=1000)
    parser.add_argument("--segments", type=int, default=100)
    parser.add_argument("--keys-per-writer", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    if args.endpoint:
        report = run(args.endpoint, args.writers, args.segments, args.keys_per_writer,
                     progress=not args.json)
    else:
        with tempfile.TemporaryDirectory(prefix="folio-sdk-memory-") as base:
            server, endpoint = start_standalone(Path(base) / "data")
            try:
                report = run(endpoint, args.writers, args.segments, args.keys_per_writer,
                             progress=not args.json)
            finally:
                server.terminate()
                try:
                    server.wait(30)
                except subprocess.TimeoutExpired:
                    server.kill()
                    server.wait(10)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        for name, value in report.items():
            print(f"{name:>28}: {value}")
    return 0 if report["within_target"] else 1


if __name__ == "__main__":
    sys.exit(main())
