"""Redis Streams through Redis' own C client, ``redis-benchmark``, for ``bench.peers``.

``redis-benchmark -c W -n N -P PIPELINE --csv XADD KEY * p PAYLOAD``: ``W``
connections, each keeping ``PIPELINE`` XADDs in flight, ``N`` in all. It
counts requests, not seconds, so the harness picks ``N`` for about the asked
duration from a short calibration run. It reports requests/s and latency
percentiles per request (from the pipeline's send to the reply). It only
writes; there is no catch-up reader.
"""

from __future__ import annotations

import csv
import io
import subprocess
from typing import Any

__all__ = ["run_xadd"]

MIN_REQUESTS = 2_000
MAX_REQUESTS = 5_000_000


def _once(endpoint: str, key: str, event_bytes: int, clients: int, pipeline: int,
          requests: int) -> dict[str, Any]:
    host, port = endpoint.rsplit(":", 1)
    payload = "x" * event_bytes  # the command line carries it: printable bytes
    argv = ["redis-benchmark", "-h", host, "-p", port, "-c", str(clients), "-n", str(requests),
            "-P", str(pipeline), "--csv", "XADD", key, "*", "p", payload]
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=600)
    rows = list(csv.reader(io.StringIO(done.stdout)))
    if done.returncode != 0 or len(rows) < 2:
        raise RuntimeError(f"redis-benchmark failed ({done.returncode}): "
                           f"{done.stderr.strip() or done.stdout.strip()}")
    row = dict(zip(rows[0], rows[-1], strict=True))
    rate = float(row["rps"])
    return {
        "events_per_s": round(rate, 1),
        "mb_per_s": round(rate * event_bytes / 1e6, 3),
        "latency_ms": {"p50": float(row["p50_latency_ms"]),
                       "p99": float(row["p99_latency_ms"]),
                       "p999": None, "max": float(row["max_latency_ms"])},
        "events": requests,
        "duration_s": round(requests / rate, 3) if rate > 0 else 0.0,
        "writers": clients,
        "errors": 0,
        "pipeline": pipeline,
    }


def run_xadd(endpoint: str, key: str, event_bytes: int, clients: int, pipeline: int,
             duration_s: float) -> dict[str, Any]:
    """XADD throughput for about ``duration_s`` (sized by a short calibration run)."""
    calibration = _once(endpoint, key, event_bytes, clients, pipeline,
                        max(MIN_REQUESTS, clients * pipeline * 10))
    requests = int(calibration["events_per_s"] * duration_s)
    requests = max(MIN_REQUESTS, min(MAX_REQUESTS, requests))
    return _once(endpoint, key, event_bytes, clients, pipeline, requests)
