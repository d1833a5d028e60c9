"""Fixtures of the integration tests: one real ``folio standalone`` per test module.

Tests of a module share the server (each uses its own topics); a test that
needs a fresh one (``test_broker_api.py``) defines its own ``server``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import folio
from tests.support.bookies import BookieProcess, BookieProcesses
from tests.support.proxy import TcpProxy
from tests.support.standalone import start_standalone


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BookieProcess]:
    """A ``folio standalone`` for the module, stopped with SIGTERM at its end."""
    processes = BookieProcesses()
    started = start_standalone(processes, tmp_path_factory.mktemp("standalone") / "data")
    yield started
    try:
        started.terminate()
    finally:
        processes.kill_all()


@pytest.fixture
def client(server: BookieProcess) -> Iterator[folio.Client]:
    """A client of the module's server."""
    with folio.Client(server.address, timeout_s=30) as made:
        yield made


@pytest.fixture
def proxy(server: BookieProcess) -> Iterator[TcpProxy]:
    """A real TCP proxy in front of the server (``proxy.cut()`` resets its connections)."""
    with TcpProxy(server.host, server.port) as made:
        yield made
