"""Folio against its peers, in one run on this machine: ``python -m bench.peers [--json]``.

OpenMessaging-Benchmark-style workloads, the same for every system: events of
each ``--sizes`` (100 B and 1 KiB), written at max rate by each ``--writers``
count (1 and 4 writer processes) to one stream for ``--duration-s``, with
durable acknowledgements as each system offers them; then one reader reads
back everything the single writer wrote (catch-up consume); then one writer
at a fixed rate (half of Folio's 1-writer, 100 B max) with one reader on new
events gives end-to-end latency p50/p99, and again at each fixed rate of
``--e2e-rates`` (10k and 25k events/s), the same for every system. Folio's
end-to-end runs also give its latency budget, stage by stage, from the
histograms of its writer and its server (``bench._peer_budget``). The systems:

* ``folio``: ``folio standalone`` (sync: acknowledged once fsynced), ``folio
  perf``'s load and read loops (``bench._peer_folio``), a 1-segment topic.
* ``nats``: ``nats-server -js``, a file-storage stream, ``nats-py``
  (``bench._peer_nats``).
* ``redis``: ``redis-server`` with ``appendonly yes`` and ``appendfsync
  always``, ``XADD`` pipelined through ``redis-py`` (``bench._peer_redis``).
* ``redis_benchmark``: the same server driven by its C client
  ``redis-benchmark`` (produce only; ``bench._peer_redis_benchmark``).
* ``ceiling``: rocksdict ``WriteBatch``es, one put per event, written with
  sync, of 100 and of 1,000 entries (``bench.ledger_bench.bench_raw``) on the
  same disk: the storage ceiling, the better of the two. It runs first, just
  before Folio.

Each server is started by the harness on loopback in a fresh directory under
``--dir``, and stopped before the next system runs. Every writer and reader
is its own process. With strace on PATH, each server's sync calls per 1,000
acknowledged events are counted in a separate short run (``bench._peer_fsync``).
The report (``bench._peer_report``) goes to ``--results-dir`` as JSON and a
Markdown table with the machine description; ``--json`` prints it as one
object whose top level has ``produce_vs_best_peer``, ``consume_vs_best_peer``
and ``produce_vs_ceiling`` (100-byte events, best writer count of each).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from bench import _peer_folio, _peer_nats, _peer_redis, _peer_redis_benchmark
from bench._peer_budget import budget, delta, scrape
from bench._peer_common import (
    Job,
    ProduceResult,
    ReadLoad,
    ReadResult,
    WriteLoad,
    produce_summary,
    run_jobs,
)
from bench._peer_disk import synced_append
from bench._peer_fsync import count_syncs
from bench._peer_report import add_ratios, machine, table, write_results
from bench._peer_servers import Server, missing_peers, nats_server, redis_server
from bench._standalone import start_standalone_with_metrics
from bench.ledger_bench import bench_raw
from folio.cli._perf_stats import BYTES_PER_MB, latency_ms, merge_encoded

__all__ = ["main", "run"]

RESULTS_DIR = Path(__file__).resolve().parent / "results"
CEILING_BATCHES = (100, 1000)
#: Ceiling bytes written per second of --duration-s (10^6 100-byte entries for 10 s).
CEILING_BYTES_PER_S = 10_000_000
DURABILITY = {
    "folio": "sync: acknowledged once fdatasynced in the bookie's journal (group commit)",
    "nats": "not durable: acknowledged once in the file store's buffers; nats-server 2.9 "
            "does not fsync them (sync calls counted below)",
    "redis": "appendfsync always: a reply waits for the fsync of the AOF holding it; with "
             "pipelining one fsync covers an event-loop iteration's commands",
    "redis_benchmark": "as redis (same server)",
    "ceiling": "sync WriteBatch: each batch fsynced",
}


@contextmanager
def _folio_server(directory: Path) -> Iterator[Server]:
    process, endpoint, metrics_url = start_standalone_with_metrics(directory)
    server = Server(process, endpoint, "folio (this tree)")
    server.metrics_url = metrics_url
    try:
        yield server
    finally:
        server.stop()


class _System:
    """How to run one system: its server, stream creation, writer and reader jobs."""

    def __init__(self, name: str, server: Callable[[Path], AbstractContextManager[Server]],
                 create: Callable[[str, str], None],
                 produce: Callable[[WriteLoad, Callable[[], None]], ProduceResult],
                 read: Callable[[ReadLoad, Callable[[], None]], ReadResult],
                 pipeline: int) -> None:
        self.name = name
        self.server = server
        self.create = create
        self.produce = produce
        self.read = read
        self.pipeline = pipeline


def _no_stream(endpoint: str, stream: str) -> None:
    """Redis creates a stream on its first XADD."""


SYSTEMS = [
    _System("folio", _folio_server, _peer_folio.create_topic, _peer_folio.produce,
            _peer_folio.read, pipeline=0),
    _System("nats", nats_server, _peer_nats.create_stream, _peer_nats.produce, _peer_nats.read,
            pipeline=1000),
    _System("redis", redis_server, _no_stream, _peer_redis.produce, _peer_redis.read,
            pipeline=100),
]


class _Run:
    """One invocation: its options, its streams' names and its progress lines."""

    def __init__(self, args: argparse.Namespace, base: Path) -> None:
        self.args = args
        self.base = base
        self.count = 0
        self.timeout_s = args.duration_s * 4 + 120

    def say(self, message: str) -> None:
        if not self.args.quiet:
            print(f"bench.peers: {message}", file=sys.stderr, flush=True)

    def stream(self, what: str) -> str:
        self.count += 1
        return f"bench{self.count}{what}"


def _produce(run: _Run, system: _System, endpoint: str, stream: str, size: int,
             writers: int, duration_s: float, rate: float = 0.0) -> list[ProduceResult]:
    load = WriteLoad(endpoint, stream, size, duration_s, rate / writers, system.pipeline)
    jobs: list[Job] = [(system.produce, load)] * writers
    results: list[ProduceResult] = run_jobs(jobs, run.timeout_s)
    return results


def _read_summary(result: ReadResult) -> dict[str, Any]:
    duration_s = result.duration_s
    return {
        "events_per_s": round(result.events / duration_s, 1) if duration_s > 0 else 0.0,
        "mb_per_s": round(result.payload_bytes / BYTES_PER_MB / duration_s, 3)
        if duration_s > 0 else 0.0,
        "events": result.events,
        "duration_s": round(duration_s, 3),
    }


def _measure_system(run: _Run, system: _System, e2e_rate: float | None,
                    report: dict[str, Any]) -> None:
    args = run.args
    out: dict[str, Any] = {"durability": DURABILITY[system.name], "produce": {},
                           "consume": {}}
    with system.server(run.base / system.name) as server:
        out["version"] = server.version
        for size in args.sizes:
            out["produce"][str(size)] = {}
            for writers in args.writers:
                stream = run.stream(f"w{writers}s{size}")
                system.create(server.address, stream)
                run.say(f"{system.name}: produce {size} B, {writers} writer(s), "
                        f"{args.duration_s} s")
                results = _produce(run, system, server.address, stream, size, writers,
                                   args.duration_s)
                summary = produce_summary(results, size)
                out["produce"][str(size)][str(writers)] = summary
                if writers == 1:
                    run.say(f"{system.name}: catch-up consume of {summary['events']:,} events")
                    [read] = run_jobs([(system.read, ReadLoad(
                        server.address, stream, "earliest", max_events=summary["events"]))],
                        run.timeout_s)
                    out["consume"][str(size)] = _read_summary(read)
        # The end-to-end run has one writer: half of the 1-writer max (as documented).
        by_writers = out["produce"][str(args.sizes[0])]
        own_max = (by_writers["1"] if "1" in by_writers
                   else max(by_writers.values(), key=lambda c: c["events_per_s"]))["events_per_s"]
        # Folio runs at half its max (or --e2e-rate); a peer at Folio's rate, or at half
        # its own max if that is lower (it could not keep up).
        rate = args.e2e_rate or e2e_rate or own_max / 2
        if system.name != "folio":
            rate = min(rate, own_max / 2)
        out["e2e"] = _end_to_end(run, system, server, rate)
        # Then every system at the same fixed rates (--e2e-rates), whatever its max.
        out["e2e_fixed"] = {}
        for fixed in args.e2e_rates:
            cell = _end_to_end(run, system, server, fixed)
            cell["above_half_own_max"] = fixed > own_max / 2
            out["e2e_fixed"][str(round(fixed))] = cell
        if not args.no_strace:
            run.say(f"{system.name}: counting sync calls (strace)")
            stream = run.stream("sync")
            system.create(server.address, stream)
            out["sync_probe"] = count_syncs(server.process.pid, lambda: sum(
                result.events for result in _produce(
                    run, system, server.address, stream, args.sizes[0], 1,
                    min(args.duration_s, 2.0))))
        if system.name == "redis":
            report["systems"]["redis"] = out
            _measure_redis_benchmark(run, server, report)
            return
    report["systems"][system.name] = out


def _end_to_end(run: _Run, system: _System, server: Server, rate: float) -> dict[str, Any]:
    """One writer at ``rate`` and one reader of new events; Folio's with its latency budget."""
    args = run.args
    stream = run.stream("e2e")
    system.create(server.address, stream)
    run.say(f"{system.name}: end-to-end latency at {rate:,.0f} events/s, "
            f"{args.e2e_duration_s} s")
    load = WriteLoad(server.address, stream, args.sizes[0], args.e2e_duration_s, rate,
                     system.pipeline)
    metrics_url = server.metrics_url
    before = scrape(metrics_url) if metrics_url else {}
    read, produced = run_jobs(
        [(system.read, ReadLoad(server.address, stream, "latest")),
         (system.produce, load)], run.timeout_s)
    end_to_end = merge_encoded([read.histogram])
    cell: dict[str, Any] = {
        "rate": round(rate), "event_bytes": args.sizes[0], "events": produced.events,
        "events_read": read.events,
        "end_to_end_latency_ms": latency_ms(end_to_end),
        "publish_latency_ms": latency_ms(merge_encoded([produced.histogram]))}
    if metrics_url:
        mean = (round(end_to_end.get_mean_value() / 1000, 3)
                if end_to_end.get_total_count() else None)
        cell["budget"] = budget(getattr(produced, "stages", {}),
                                delta(before, scrape(metrics_url)),
                                {**cell["end_to_end_latency_ms"], "mean": mean})
    return cell


def _measure_redis_benchmark(run: _Run, server: Server, report: dict[str, Any]) -> None:
    args = run.args
    out: dict[str, Any] = {"durability": DURABILITY["redis_benchmark"],
                           "version": server.version, "produce": {}}
    for size in args.sizes:
        out["produce"][str(size)] = {}
        for writers in args.writers:
            run.say(f"redis-benchmark: XADD {size} B, {writers} client(s)")
            out["produce"][str(size)][str(writers)] = _peer_redis_benchmark.run_xadd(
                server.address, run.stream("rb"), size, writers, 100, args.duration_s)
    report["systems"]["redis_benchmark"] = out


def _measure_ceiling(run: _Run, report: dict[str, Any]) -> None:
    out: dict[str, Any] = {"durability": DURABILITY["ceiling"], "version": "rocksdict",
                           "produce": {}}
    for size in run.args.sizes:
        entries = max(2_000, int(run.args.duration_s * CEILING_BYTES_PER_S / size))
        out["produce"][str(size)] = {}
        for batch in CEILING_BATCHES:
            run.say(f"ceiling: {entries:,} x {size} B, sync batches of {batch}")
            directory = run.base / f"ceiling-{size}-{batch}"
            rate = bench_raw(directory, entries, size, batch)
            shutil.rmtree(directory, ignore_errors=True)
            out["produce"][str(size)][f"1, batch {batch}"] = {
                "events_per_s": round(rate, 1), "mb_per_s": round(rate * size / 1e6, 3),
                "latency_ms": None, "events": entries, "batch": batch}
    report["systems"]["ceiling"] = out


def run(args: argparse.Namespace, base: Path) -> dict[str, Any]:
    """Measure every system; the report (without the results files)."""
    started = time.time()
    report: dict[str, Any] = {
        "started_at": started,
        "command": "python -m bench.peers " + shlex.join(args.argv),
        "settings": {"systems": args.systems, "sizes": args.sizes, "writers": args.writers,
                     "e2e_rates": args.e2e_rates,
                     "duration_s": args.duration_s, "e2e_duration_s": args.e2e_duration_s,
                     "redis_pipeline": 100, "nats_max_pending_acks": 1000,
                     "ceiling_batches": list(CEILING_BATCHES)},
        "machine": machine(base),
        "systems": {},
    }
    state = _Run(args, base)
    # The ceilings first, right before Folio: the disk moves between runs on a shared machine.
    _measure_ceiling(state, report)
    state.say("disk: 1 MiB appends, each fdatasynced")
    report["disk"] = synced_append(base / "disk", seconds=min(2.0, args.duration_s))
    e2e_rate: float | None = None
    for system in (system for system in SYSTEMS if system.name in args.systems):
        _measure_system(state, system, e2e_rate, report)
        if system.name == "folio":
            e2e_rate = report["systems"]["folio"]["e2e"]["rate"]
    # Folio first in the tables, the ceiling last.
    report["systems"]["ceiling"] = report["systems"].pop("ceiling")
    report["machine"]["load_average_at_end"] = [round(value, 2) for value in
                                                os.getloadavg()]
    report["elapsed_s"] = round(time.time() - started, 1)
    add_ratios(report)
    return report


def _list(kind: type, text: str) -> list[Any]:
    return [kind(item) for item in text.split(",") if item]


def main(argv: list[str] | None = None) -> int:
    """Parse options, run, write the results, print the table (or JSON)."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.peers",
        description="Folio standalone (sync) against NATS JetStream (file storage), Redis "
        "Streams (appendfsync always; redis-py and redis-benchmark) and the raw rocksdict "
        "sync-write ceiling, in one run on loopback: produce at max rate (1 and 4 writers), "
        "catch-up consume, end-to-end latency at half of Folio's max rate. Writes JSON and "
        "a Markdown table to --results-dir. Needs nats-server, redis-server and "
        "redis-benchmark on PATH (.ci/run installs them).")
    parser.add_argument("--json", action="store_true",
                        help="print the report as one JSON object instead of the table")
    parser.add_argument("--quick", action="store_true",
                        help="short runs: --duration-s 2 and --e2e-duration-s 3 unless given")
    parser.add_argument("--duration-s", type=float, default=None,
                        help="seconds of each max-rate produce run (default 10; 2 with --quick)")
    parser.add_argument("--e2e-duration-s", type=float, default=None,
                        help="seconds of the fixed-rate end-to-end run (default 10; 3 with "
                        "--quick)")
    parser.add_argument("--e2e-rate", type=float, default=0.0,
                        help="events/s of the end-to-end run (default: half of Folio's "
                        "1-writer max; a peer slower than twice that runs at half its own)")
    parser.add_argument("--e2e-rates", type=lambda text: _list(float, text),
                        default=[10_000.0, 25_000.0],
                        help="fixed rates (events/s, comma-separated) at which every system "
                        "also runs the end-to-end test, side by side (default 10000,25000; "
                        "empty: none)")
    parser.add_argument("--sizes", type=lambda text: _list(int, text), default=[100, 1024],
                        help="event sizes in bytes, comma-separated, each >= 8 (the first is "
                        "the headline size; default 100,1024)")
    parser.add_argument("--writers", type=lambda text: _list(int, text), default=[1, 4],
                        help="writer counts, comma-separated (default 1,4)")
    parser.add_argument("--dir", default=None,
                        help="where the servers keep data (default: a temp dir, removed)")
    parser.add_argument("--results-dir", default=str(RESULTS_DIR),
                        help="where peers-<time>.json and .md go (default bench/results)")
    parser.add_argument("--systems", type=lambda text: _list(str, text),
                        default=[system.name for system in SYSTEMS],
                        help="which of folio,nats,redis to run (redis includes "
                        "redis-benchmark; the ceiling always runs; default all)")
    parser.add_argument("--no-strace", action="store_true",
                        help="do not count the servers' sync calls with strace")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    args.duration_s = args.duration_s or (2.0 if args.quick else 10.0)
    args.e2e_duration_s = args.e2e_duration_s or (3.0 if args.quick else 10.0)
    if min(args.sizes, default=0) < 8 or 1 not in args.writers:
        parser.error("--sizes must all be >= 8 and --writers must include 1")
    if "folio" not in args.systems or not set(args.systems) <= {s.name for s in SYSTEMS}:
        parser.error("--systems must include folio and name only folio, nats, redis")
    missing = missing_peers()
    if missing:
        parser.error(f"not on PATH: {', '.join(missing)} (.ci/run installs them)")
    base = Path(tempfile.mkdtemp(prefix="folio-bench-peers-", dir=args.dir))
    try:
        report = run(args, base)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    json_path, markdown_path = write_results(report, Path(args.results_dir))
    report["results_files"] = [str(json_path), str(markdown_path)]
    print(json.dumps(report, indent=2) if args.json else table(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
