"""``python -m bench.security_bench`` end to end, tiny: both servers, one round each.

Checks the report's shape (a run per server, a positive ratio); asserts no
speed (the machine is shared).
"""

from __future__ import annotations

import json
import subprocess
import sys


def test_security_bench_reports_a_ratio() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.security_bench", "--json", "--no-save",
         "--duration-s", "0.5", "--rounds", "1", "--unary-calls", "20"],
        capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert set(report["events_per_s"]) == {"plain", "tls_token"}
    assert all(len(runs) == 1 and runs[0] > 0 for runs in report["events_per_s"].values())
    assert report["ratio_tls_token_to_plain"] > 0
    assert report["get_topic_ratio_tls_token_to_plain"] > 0
