"""Broker benchmark: ``folio perf`` against a real ``folio standalone``, beside raw RocksDB.

Run ``python -m bench.broker_bench [--duration-s 10] [--json]``. In one run, on
the same disk, with sync durability:

* ``raw``: rocksdict ``WriteBatch``es of 100 entries, each fsynced
  (``bench.ledger_bench.bench_raw``), for entries of the event size: the
  ceiling of one synced write path on this disk, in entries/s.
* ``produce``: ``folio perf produce`` (one writer process, max rate) against
  ``folio standalone`` (sync), in acknowledged events/s, MB/s and publish
  latency; ``produce_ratio`` is events/s over ``raw`` entries/s (above 1 means
  the broker's blocks beat per-100-entry synced batches).
* ``consume``: ``folio perf consume --from earliest`` reading back everything
  produced (catch-up), in events/s.

The server, the writer and the reader are separate processes, as a user would
run them. Peers (NATS, Redis) run beside Folio in the observability issue's
harness; this one compares with the raw storage only.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench._standalone import start_standalone
from bench.ledger_bench import bench_raw

__all__ = ["main", "run"]

RAW_ENTRIES = 100_000


def _folio(*args: str, timeout_s: float) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-m", "folio.cli", *args], capture_output=True,
                          text=True, timeout=timeout_s, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"folio {' '.join(args)} failed ({done.returncode}): {done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def run(base: Path, duration_s: float, sizes: list[int], progress: bool) -> dict[str, Any]:
    """Measure every size; returns the report as a dict."""
    report: dict[str, Any] = {"duration_s": duration_s, "durability": "sync", "sizes": {}}
    for size in sizes:
        if progress:
            print(f"raw rocksdict, {size} B entries ...", file=sys.stderr, flush=True)
        raw_dir = base / f"raw-{size}"
        raw = bench_raw(raw_dir, RAW_ENTRIES, size)
        shutil.rmtree(raw_dir, ignore_errors=True)
        server, endpoint = start_standalone(base / f"standalone-{size}")
        try:
            topic = f"bench-{size}"
            if progress:
                print(f"folio perf produce, {size} B events, {duration_s} s ...",
                      file=sys.stderr, flush=True)
            produce = _folio("perf", "produce", "--endpoint", endpoint, "--topic", topic,
                             "--event-bytes", str(size), "--rate", "0",
                             "--duration-s", str(duration_s), "--writers", "1", "--json",
                             timeout_s=duration_s * 4 + 60)
            if progress:
                print(f"folio perf consume, {produce['events']} events ...",
                      file=sys.stderr, flush=True)
            consume = _folio("perf", "consume", "--endpoint", endpoint, "--topic", topic,
                             "--from", "earliest", "--max-events", str(produce["events"]),
                             "--json", timeout_s=duration_s * 4 + 60)
        finally:
            server.terminate()
            server.wait(60)
        report["sizes"][str(size)] = {
            "raw_entries_per_s": round(raw),
            "produce": produce,
            "consume": consume,
            "produce_ratio": round(produce["events_per_s"] / raw, 2),
            "consume_ratio": round(consume["events_per_s"] / raw, 2),
        }
    return report


def _table(report: dict[str, Any]) -> str:
    lines = [f"{'size':>6} {'raw/s':>10} {'produce/s':>10} {'ratio':>6} {'MB/s':>7} "
             f"{'p50 ms':>7} {'p99 ms':>7} {'p99.9':>7} {'max':>7} {'consume/s':>10}"]
    for size, row in report["sizes"].items():
        latency = row["produce"]["latency_ms"]
        lines.append(
            f"{size:>6} {row['raw_entries_per_s']:>10,} {row['produce']['events_per_s']:>10,.0f} "
            f"{row['produce_ratio']:>6.2f} {row['produce']['mb_per_s']:>7.1f} "
            f"{latency['p50']:>7.1f} {latency['p99']:>7.1f} {latency['p999']:>7.1f} "
            f"{latency['max']:>7.1f} {row['consume']['events_per_s']:>10,.0f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Parse options, run, print the table (or JSON)."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.broker_bench",
        description="folio perf produce/consume against folio standalone (sync), beside raw "
        "rocksdict synced batches on the same disk.")
    parser.add_argument("--duration-s", type=float, default=10.0,
                        help="seconds of produce load per event size (default 10)")
    parser.add_argument("--sizes", default="100,1024",
                        help="event sizes in bytes, comma-separated (default 100,1024)")
    parser.add_argument("--dir", default=None, help="where to put data (default: a temp dir)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    sizes = [int(size) for size in args.sizes.split(",")]
    base = Path(tempfile.mkdtemp(prefix="folio-broker-bench-", dir=args.dir))
    try:
        report = run(base, args.duration_s, sizes, progress=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(json.dumps(report, indent=2) if args.json else _table(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
