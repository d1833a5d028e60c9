"""Fixtures of the fault tests: a fresh ``folio standalone`` per test, and a proxy before it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.bookies import BookieProcess, BookieProcesses
from tests.support.proxy import TcpProxy
from tests.support.standalone import start_standalone


@pytest.fixture
def server(bookie_processes: BookieProcesses, tmp_path: Path) -> BookieProcess:
    """A ``folio standalone`` of this test alone (SIGKILLed at teardown if still running)."""
    return start_standalone(bookie_processes, tmp_path / "data")


@pytest.fixture
def proxy(server: BookieProcess) -> Iterator[TcpProxy]:
    """A real TCP proxy in front of the server (``proxy.cut()`` resets its connections)."""
    with TcpProxy(server.host, server.port) as made:
        yield made
