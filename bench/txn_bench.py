"""Full-transaction throughput: transactions/s of 10 events across 2 segments each.

Run ``python -m bench.txn_bench [--duration-s 5] [--threads 8] [--json]``. Starts its
own ``folio standalone`` (``bench._standalone``) and one ``folio.Client``; each
transaction is ``begin`` (BeginTxn), 10 events of 100 bytes whose routing keys
hit both segments of a 2-segment topic (5 each), ``commit`` (blocks
acknowledged, then CommitTxn). Measured sequentially (one thread) and with
``--threads`` threads sharing the client's writer; reports transactions/s and
p50/p99 commit latency (``commit`` alone) and whole-transaction latency.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from bisect import bisect_right
from pathlib import Path
from typing import Any

import folio
from bench._standalone import start_standalone
from folio.api.v1.routing import routing_point

__all__ = ["main", "run"]

EVENTS = 10
EVENT_BYTES = 100


def _keys(client: folio.Client, topic: str) -> list[str]:
    highs = [s.key_high for s in client.get_segments(topic)]
    chosen: dict[int, list[str]] = {0: [], 1: []}
    n = 0
    while min(len(v) for v in chosen.values()) < EVENTS // 2:
        key = f"k{n}"
        n += 1
        index = min(bisect_right(highs, routing_point(key)), 1)
        if len(chosen[index]) < EVENTS // 2:
            chosen[index].append(key)
    return chosen[0] + chosen[1]


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def _phase(writer: folio.TransactionalWriter[bytes], keys: list[str], threads: int,
           duration_s: float) -> dict[str, Any]:
    payload = b"x" * EVENT_BYTES
    commits: list[float] = []
    totals: list[float] = []
    lock = threading.Lock()
    stop = time.monotonic() + duration_s

    def work() -> None:
        mine_commit: list[float] = []
        mine_total: list[float] = []
        while time.monotonic() < stop:
            started = time.perf_counter()
            txn = writer.begin()
            for key in keys:
                txn.write_event(payload, routing_key=key)
            before = time.perf_counter()
            txn.commit()
            done = time.perf_counter()
            mine_commit.append(done - before)
            mine_total.append(done - started)
        with lock:
            commits.extend(mine_commit)
            totals.extend(mine_total)

    began = time.monotonic()
    workers = [threading.Thread(target=work) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    elapsed = time.monotonic() - began
    return {
        "threads": threads,
        "transactions": len(commits),
        "txns_per_s": round(len(commits) / elapsed, 1),
        "events_per_s": round(len(commits) * EVENTS / elapsed, 1),
        "commit_p50_ms": round(_pct(commits, 0.50) * 1000, 2),
        "commit_p99_ms": round(_pct(commits, 0.99) * 1000, 2),
        "txn_p50_ms": round(_pct(totals, 0.50) * 1000, 2),
        "txn_p99_ms": round(_pct(totals, 0.99) * 1000, 2),
    }


def run(base: Path, duration_s: float, threads: int, progress: bool) -> dict[str, Any]:
    """Both phases against a fresh standalone; the report as a dict."""
    server, endpoint = start_standalone(base / "standalone")
    try:
        with folio.Client(endpoint, timeout_s=30) as client:
            client.create_topic("txn-bench", segments=2)
            keys = _keys(client, "txn-bench")
            with client.transactional_writer("txn-bench") as writer:
                _phase(writer, keys, 1, min(1.0, duration_s / 5))  # warm-up
                report: dict[str, Any] = {
                    "duration_s": duration_s, "events_per_txn": EVENTS,
                    "event_bytes": EVENT_BYTES, "segments_per_txn": 2}
                if progress:
                    print("sequential ...", file=sys.stderr, flush=True)
                report["sequential"] = _phase(writer, keys, 1, duration_s)
                if progress:
                    print(f"{threads} threads ...", file=sys.stderr, flush=True)
                report["concurrent"] = _phase(writer, keys, threads, duration_s)
        return report
    finally:
        server.terminate()
        server.wait(30)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--duration-s", type=float, default=5.0)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="folio-txn-bench-") as tmp:
        report = run(Path(tmp), args.duration_s, args.threads, progress=not args.json)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        for name in ("sequential", "concurrent"):
            phase = report[name]
            print(f"{name} ({phase['threads']} threads): {phase['txns_per_s']} txns/s, "
                  f"commit p50 {phase['commit_p50_ms']} ms p99 {phase['commit_p99_ms']} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
