"""``python -m bench.kafka`` end to end, tiny and bounded: a real standalone, real clients.

Checks the report's shape and that every rate was measured (positive);
it asserts no speed (the machine is shared).
"""

from __future__ import annotations

import json
import subprocess
import sys


def test_kafka_bench_reports_both_paths_for_each_size() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.kafka", "--json", "--sizes", "100,1024",
         "--duration-s", "0.3", "--rounds", "1"],
        capture_output=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    rows = json.loads(done.stdout)
    assert [row["size_bytes"] for row in rows] == [100, 1024]
    for row in rows:
        for path in ("sdk", "kafka"):
            for step in ("produce", "consume"):
                assert row[f"{path}_{step}_events_per_s"] > 0
                # CPU time is counted in clock ticks (10 ms): a tiny run may see none.
                assert row[f"{path}_{step}_broker_us_per_event"] >= 0
