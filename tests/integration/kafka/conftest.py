"""Fixtures of the Kafka tests: one real ``folio standalone --kafka-port 0`` per module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import folio
from tests.support.bookies import BookieProcess, BookieProcesses
from tests.support.kafka import kafka_address
from tests.support.standalone import start_standalone


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BookieProcess]:
    """A ``folio standalone`` serving Kafka too, stopped with SIGTERM at the module's end."""
    processes = BookieProcesses()
    started = start_standalone(processes, tmp_path_factory.mktemp("standalone") / "data",
                               "--kafka-port", "0")
    yield started
    try:
        started.terminate()
    finally:
        processes.kill_all()


@pytest.fixture
def bootstrap(server: BookieProcess) -> str:
    """``host:port`` of the server's Kafka listener."""
    host, port = kafka_address(server)
    return f"{host}:{port}"


@pytest.fixture
def client(server: BookieProcess) -> Iterator[folio.Client]:
    """A Folio SDK client of the module's server."""
    with folio.Client(server.address, timeout_s=30) as made:
        yield made
