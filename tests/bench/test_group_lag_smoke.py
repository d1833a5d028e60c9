"""``python -m bench.group_lag`` end to end on a small fleet: it reports every figure.

It asserts no speed (the machine is shared), only that the round ran and the
series it set are on the page.
"""

from __future__ import annotations

import re
import subprocess
import sys


def test_group_lag_bench_reports_its_figures() -> None:
    done = subprocess.run([sys.executable, "-m", "bench.group_lag", "--groups", "10",
                           "--topics", "1", "--partitions", "3", "--rounds", "1"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert re.fullmatch(r"30 series: \d+ ms CPU per round, longest event-loop hold [\d.]+ ms; "
                        r"/metrics page \d+ ms, \d+ KiB\n", done.stdout), done.stdout
