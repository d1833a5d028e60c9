"""``kill -USR2``: a bookie or a standalone writes its tasks' and threads' stacks and runs on.

The harness sends it to a process that outlived its SIGTERM before it
SIGKILLs it (``tests/support/bookies.py``), so a hang leaves its stacks in
the log; here the dump itself is checked on real processes.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

import folio
from tests.support.bookies import BookieProcess, BookieProcesses
from tests.support.standalone import start_standalone
from tests.support.wait import wait_for

pytestmark = pytest.mark.faults


def _dumped(process: BookieProcess) -> str:
    process.process.send_signal(signal.SIGUSR2)
    wait_for(lambda: "SIGUSR2: threads" in process.log() and "most recent call first"
             in process.log(), "the stack dump in the log", 30)
    return process.log()


def test_a_standalone_dumps_its_stacks_and_goes_on_serving(
        bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    server = start_standalone(bookie_processes, tmp_path / "data")
    log = _dumped(server)
    assert "asyncio tasks ---" in log and "Stack for <Task" in log
    with folio.Client(server.address, timeout_s=30) as client:
        client.create_topic("after-dump", 1)
        assert [t.name for t in client.list_topics()] == ["after-dump"]
    assert server.terminate() == 0, server.log()


def test_a_bookie_dumps_its_stacks_and_stops_cleanly(
        bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    bookie = bookie_processes.start(tmp_path / "bookie")
    log = _dumped(bookie)
    assert "asyncio tasks ---" in log
    assert bookie.terminate() == 0, bookie.log()
