"""``python -m bench.cli_startup`` end to end, one run of each command against its own standalone.

Checks the report's shape and that every command ran (a positive wall time);
it asserts no speed (the machine is shared).
"""

from __future__ import annotations

import json
import subprocess
import sys

from bench.cli_startup import commands


def test_cli_startup_bench_reports_every_command() -> None:
    done = subprocess.run([sys.executable, "-m", "bench.cli_startup", "--runs", "1", "--json"],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert report["runs"] == 1
    assert list(report["commands"]) == list(commands("unused"))
    for figures in report["commands"].values():
        assert figures["median_wall_s"] > 0
        assert figures["min_wall_s"] == figures["median_wall_s"]  # one run
        assert figures["median_cpu_s"] >= 0  # counted in clock ticks: a short run may see none
