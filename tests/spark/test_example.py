"""The click-count example, end to end: its one command, on a small input, prints right counts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import folio
from examples.clickcount import clicks, expected_counts

ROOT = Path(__file__).resolve().parents[2]


def test_the_click_count_pipeline_prints_the_right_counts(client: folio.Client,
                                                          tmp_path: Path) -> None:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    done = subprocess.run(
        [sys.executable, "-m", "examples.clickcount", "--endpoint", client.endpoint,
         "--events", "500", "--seconds", "40", "--seed", "3",
         "--checkpoint", str(tmp_path / "checkpoint")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    header = next(line for line in lines if line.startswith("counted"))
    expected = expected_counts(clicks(500, 40, 3))
    assert header.startswith(f"counted 501 clicks into {len(expected)} ")
    printed = [json.loads(line) for line in lines if line.startswith("{")]
    got = {(row["page"], row["window_ms"]): row["count"] for row in printed}
    assert len(printed) == len(expected)  # each window's count once, final
    assert got == dict(expected)
