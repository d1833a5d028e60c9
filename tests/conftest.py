"""Fixtures shared by every test package."""

from __future__ import annotations

import gc
import warnings
from collections.abc import Iterator

import pytest

from tests.support.bookies import BookieProcesses

# A real ZooKeeper: the `zookeeper`, `zk_url` and `make_zookeeper` fixtures; the
# `processes` marker and `--no-processes` of the fast tier (`make unit`); the
# groups of `make test`'s workers (tests/support/workers.py).
pytest_plugins = ["tests.support.zookeeper", "tests.support.tiers", "tests.support.workers"]


@pytest.fixture
def bookie_processes() -> Iterator[BookieProcesses]:
    """Start ``folio bookie`` processes; any still running at teardown are SIGKILLed."""
    processes = BookieProcesses()
    yield processes
    processes.kill_all()


@pytest.fixture(autouse=True)
def _finalize_kafka_client_sockets(request: pytest.FixtureRequest) -> Iterator[None]:
    """After a Kafka test, free the sockets its clients dropped without closing.

    kafka-python leaves the sockets of connections that failed (a broker
    killed, a port closed) unclosed in reference cycles; the garbage
    collector finalises them whenever it next runs, and their ResourceWarning
    (an error here) then fails whatever test runs at that moment, in the same
    worker. Collected here, at the end of the test that made them.
    """
    yield
    if "kafka" in request.node.nodeid.split("::", 1)[0]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ResourceWarning)
            gc.collect()
