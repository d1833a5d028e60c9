"""Fixtures shared by every test package."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.bookies import BookieProcesses

# A real ZooKeeper: the `zookeeper`, `zk_url` and `make_zookeeper` fixtures; the
# `processes` marker and `--no-processes` of the fast tier (`make unit`); the
# groups of `make test`'s two workers (tests/support/workers.py).
pytest_plugins = ["tests.support.zookeeper", "tests.support.tiers", "tests.support.workers"]


@pytest.fixture
def bookie_processes() -> Iterator[BookieProcesses]:
    """Start ``folio bookie`` processes; any still running at teardown are SIGKILLed."""
    processes = BookieProcesses()
    yield processes
    processes.kill_all()
