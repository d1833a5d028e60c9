"""End-to-end latency only, repeated: ``python -m bench.e2e_rates [--systems folio,redis]``.

``bench.peers`` measures end-to-end latency once per rate, after minutes of
max-rate runs. Comparing two builds on a shared machine needs many short
runs of that one test, alternated: this runs ``bench.peers``' own end-to-end
test (one writer at a fixed rate, one reader of new events, 100-byte events,
Folio's latency budget from its histograms) ``--repeat`` times per rate
against one server per system, and prints one JSON line per run: the
system, rate, load average at the start, end-to-end p50/p99 (ms), events
written and read, and for Folio each budget stage's mean and p99 (ms) and
the blocks and group commits counted. Nothing is written to
``bench/results``. Run it once per build (``PYTHONPATH`` naming the tree)
and alternate; docs/bench.md, "End-to-end latency at 10,000 events/s".
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench import peers

__all__ = ["main"]


def _line(system: str, rate: float, load: float, cell: dict[str, Any]) -> dict[str, Any]:
    latency = cell["end_to_end_latency_ms"]
    line: dict[str, Any] = {"system": system, "rate": round(rate), "load": round(load, 1),
                            "p50_ms": latency["p50"], "p99_ms": latency["p99"],
                            "events": cell["events"], "events_read": cell["events_read"]}
    budget = cell.get("budget")
    if budget:
        stages = budget["stages"]
        line["mean_ms"] = stages["end_to_end"]["mean_ms"]
        line["rest_of_path_ms"] = budget["rest_of_path_ms"]
        line["stages_mean_p99_ms"] = {name: [stage["mean_ms"], stage["p99_ms"]]
                                      for name, stage in stages.items()
                                      if name != "end_to_end"}
        line["blocks"] = stages["sdk_batch_wait"]["count"]
        line["group_commits"] = stages["fsync"]["count"]
    return line


def main(argv: list[str] | None = None) -> int:
    """Parse options, run every system's end-to-end test, print a JSON line per run."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.e2e_rates",
        description="bench.peers' end-to-end latency test alone, repeated: one writer at "
        "each fixed rate, one reader of new events, one JSON line per run on stdout.")
    parser.add_argument("--systems", default="folio,redis",
                        help="comma-separated, of folio and redis (default folio,redis)")
    parser.add_argument("--rates", default="10000",
                        help="events/s, comma-separated (default 10000)")
    parser.add_argument("--duration-s", type=float, default=5.0,
                        help="seconds of each run (default 5)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per rate (default 1)")
    args = parser.parse_args(argv)
    rates = [float(rate) for rate in args.rates.split(",") if rate]
    names = [name for name in args.systems.split(",") if name]
    systems = {system.name: system for system in peers.SYSTEMS}
    unknown = [name for name in names if name not in ("folio", "redis")]
    if unknown or not rates or args.repeat < 1 or args.duration_s <= 0:
        parser.error("--systems names folio and redis only; --rates, --repeat and "
                     "--duration-s must be positive")
    base = Path(tempfile.mkdtemp(prefix="folio-bench-e2e-"))
    run = peers._Run(argparse.Namespace(sizes=[100], e2e_duration_s=args.duration_s,
                                        duration_s=args.duration_s, quiet=True), base)
    try:
        for name in names:
            system = systems[name]
            with system.server(base / name) as server:
                for _ in range(args.repeat):
                    for rate in rates:
                        load = os.getloadavg()[0]
                        cell = peers._end_to_end(run, system, server, rate)
                        print(json.dumps(_line(name, rate, load, cell)), flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
