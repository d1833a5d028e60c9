"""The asyncio ingest example (``examples/ingest_server.py``), end to end against a real
standalone: its self-test posts events concurrently over HTTP, each request awaiting its
acknowledgement, reads them back and checks each was written once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.bookies import BookieProcess

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.processes
def test_the_ingest_example_writes_every_posted_event_once(server: BookieProcess) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "examples.ingest_server", "--endpoint", server.address,
         "--self-test", "300"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == ["all 300 events written once"]


def test_the_example_refuses_a_wrong_count() -> None:
    from examples.ingest_server import main  # noqa: PLC0415

    with pytest.raises(SystemExit):
        main(["--self-test", "not-a-number"])
