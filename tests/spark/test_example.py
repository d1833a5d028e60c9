"""The click-count example, end to end: its one command, run twice on one broker, prints
right counts each time; and its check fails when the counts are wrong."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import folio
from examples.clickcount import check_counts, clicks, expected_counts, read_counts

ROOT = Path(__file__).resolve().parents[2]


def _run(client: folio.Client, checkpoint: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    return subprocess.run(
        [sys.executable, "-m", "examples.clickcount", "--endpoint", client.endpoint,
         "--events", "300", "--seconds", "40", "--seed", "3",
         "--checkpoint", str(checkpoint)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)


# Two runs of the example, each its own spark-submit JVM (up to 300 s each, as
# _run bounds them): the default 120 s was passed once with the suite's other
# worker busy beside it.
@pytest.mark.timeout(660)
def test_the_click_count_pipeline_run_twice_prints_the_right_counts(
        client: folio.Client, tmp_path: Path) -> None:
    expected = expected_counts(clicks(300, 40, 3))
    run_ids = set()
    for run in range(2):  # the same broker, the same clicks: the same counts each time
        done = _run(client, tmp_path / f"checkpoint-{run}")
        assert done.returncode == 0, done.stderr[-3000:]
        lines = done.stdout.splitlines()
        run_ids.add(lines[0].split()[1])
        header = next(line for line in lines if line.startswith("counted"))
        assert header.startswith(f"counted 301 clicks into {len(expected)} ")
        printed = [json.loads(line) for line in lines if line.startswith("{")]
        got = {(row["page"], row["window_ms"]): row["count"] for row in printed}
        assert len(printed) == len(expected)  # each window's count once, final
        assert got == dict(expected)
        assert lines[-1] == f"all {len(expected)} counts are right"
    assert len(run_ids) == 2  # each run its own topics


@pytest.mark.parametrize("wrong", ["a count off by one", "an extra count"])
def test_the_check_finds_wrong_counts(client: folio.Client, wrong: str) -> None:
    topic = f"counts-{wrong.replace(' ', '-')}"
    client.create_topic(topic, segments=2)
    expected = Counter({("/", 1_700_000_000_000): 3, ("/docs", 1_700_000_010_000): 2})
    rows: list[dict[str, Any]] = [{"page": page, "window_ms": window_ms, "count": count}
            for (page, window_ms), count in expected.items()]
    if wrong == "a count off by one":
        rows[1]["count"] += 1
    else:
        rows.append({"page": "/blog", "window_ms": 1_700_000_000_000, "count": 1})
    with client.writer(topic, folio.JsonSerializer()) as writer:
        for row in rows:
            writer.write_event(row, routing_key=f"{row['page']}|{row['window_ms']}")
    differences = check_counts(expected, read_counts(client, topic, len(expected), 10.0))
    assert len(differences) == 1
    assert differences[0] in (
        "page '/docs' window 1700000010000: expected 2, got 3",
        "page '/blog' window 1700000000000: expected 0, got 1")
    assert check_counts(expected, expected) == []
