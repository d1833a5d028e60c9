"""Fixtures of the observability tests: a real ``folio standalone`` per module, and its metrics.

The standalone runs maintenance every 0.2 s and snapshots a transaction
buffer after every change, so snapshot metrics show up within a test.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import folio
from tests.observability.scrape import metrics_url
from tests.support.bookies import BookieProcess, BookieProcesses
from tests.support.standalone import start_standalone

#: Flags that make background work (snapshots, rollover) happen within a test.
BUSY_FLAGS = ("--retention-interval-s", "0.2", "--txn-snapshot-every-changes", "1")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BookieProcess]:
    """A ``folio standalone`` for the module, stopped with SIGTERM at its end."""
    processes = BookieProcesses()
    started = start_standalone(processes, tmp_path_factory.mktemp("standalone") / "data",
                               *BUSY_FLAGS)
    yield started
    try:
        started.terminate()
    finally:
        processes.kill_all()


@pytest.fixture(scope="module")
def url(server: BookieProcess) -> str:
    """The server's ``/metrics`` URL."""
    return metrics_url(server)


@pytest.fixture
def client(server: BookieProcess) -> Iterator[folio.Client]:
    """A client of the module's server."""
    with folio.Client(server.address, timeout_s=30) as made:
        yield made
