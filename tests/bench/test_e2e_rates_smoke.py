"""``python -m bench.e2e_rates``: one short run against a real Folio standalone.

Checks the line's shape and bookkeeping (the reader read every event the
writer had acknowledged, the latency budget is there); it asserts no speed
(the machine is shared).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


@pytest.mark.timeout(300)
def test_one_run_prints_one_line_with_the_budget() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.e2e_rates", "--systems", "folio", "--rates", "2000",
         "--duration-s", "0.5"], capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 0, done.stderr
    [line] = [json.loads(text) for text in done.stdout.splitlines()]
    assert (line["system"], line["rate"]) == ("folio", 2000)
    assert line["events"] > 0
    assert line["events_read"] == line["events"]
    assert line["p50_ms"] is not None
    assert set(line["stages_mean_p99_ms"]) >= {"sdk_batch_wait", "sdk_send_to_ack", "fsync"}
    assert line["blocks"] > 0


def test_an_unknown_system_is_refused() -> None:
    done = subprocess.run([sys.executable, "-m", "bench.e2e_rates", "--systems", "nats"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert "--systems names folio and redis only" in done.stderr
