"""``python -m bench.consumer_assignors`` end to end on small groups: it reports every figure.

It asserts no speed (the machine is shared), only that each size was timed.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest


@pytest.mark.processes
def test_consumer_assignors_bench_reports_its_figures() -> None:
    done = subprocess.run([sys.executable, "-m", "bench.consumer_assignors", "--members", "2,5",
                           "--partitions-per-member", "3"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert [line.split(",")[0] for line in lines] == ["2 members", "5 members"]
    assert all(re.fullmatch(r"\d+ members, \d+ partitions: uniform [\d.]+ ms, uniform with one "
                            r"joining [\d.]+ ms, range [\d.]+ ms", line) for line in lines)
