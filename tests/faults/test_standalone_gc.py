"""``folio standalone``: a topic deleted while the in-process bookie's disk fails is collected.

The bookie's delete of the topic's ledgers fails (``SIGUSR1`` of
``tests/support/faulty_bookie_standalone.py``: every bookie write fails as on a full
disk), the metadata goes anyway, and once the disk takes writes again
(``SIGHUP``) the bookie's garbage collector (``--gc-interval-ms 200``) drops the
left-over ledgers, while the other topic's events stay readable.
"""

from __future__ import annotations

import os
import re
import signal
import urllib.request
from pathlib import Path

import pytest

import folio
from tests.support.bookies import BookieProcess, BookieProcesses
from tests.support.faulty_bookie_standalone import FAILING, HEALED
from tests.support.standalone import start_standalone
from tests.support.wait import wait_for

pytestmark = pytest.mark.faults

FAULTY = "tests.support.faulty_bookie_standalone"


def _switch(server: BookieProcess, signum: signal.Signals, line: str) -> None:
    """Send ``signum`` and wait until the process logged ``line`` once more."""
    before = server.log().count(line)
    os.kill(server.pid, signum)
    wait_for(lambda: server.log().count(line) > before, line)


def _metric(server: BookieProcess, sample: str) -> float:
    url = re.search(r"(http://\S+/metrics)", server.ready_line)
    assert url is not None, server.ready_line
    with urllib.request.urlopen(url.group(1), timeout=10) as response:
        text = response.read().decode()
    found = re.search(rf"^{re.escape(sample)} (\S+)$", text, re.MULTILINE)
    return 0.0 if found is None else float(found.group(1))


def _write(client: folio.Client, topic: str, count: int) -> None:
    with client.writer(topic, folio.StringSerializer()) as writer:
        futures = [writer.write_event(f"{topic}-{n}", f"key-{n}") for n in range(count)]
        writer.flush(timeout=60)
    assert all(future.result(timeout=0).offset >= 0 for future in futures)


def test_a_topic_deleted_during_a_disk_failure_is_collected_once_healed(
        bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    server = start_standalone(bookie_processes, tmp_path / "data", "--gc-interval-ms", "200",
                              module=FAULTY)
    collected = 'folio_bookie_gc_ledgers_total{reason="deleted"}'
    with folio.Client(server.address, timeout_s=30) as client:
        client.create_topic("doomed", 2)
        client.create_topic("kept", 1)
        _write(client, "doomed", 10)
        _write(client, "kept", 10)
        held = _metric(server, "folio_bookie_ledgers")
        assert held >= 2

        _switch(server, signal.SIGUSR1, FAILING)
        client.delete_topic("doomed")
        _switch(server, signal.SIGHUP, HEALED)
        assert "left on bookie" in server.log()

        wait_for(lambda: _metric(server, collected) >= 1,
                 "the doomed topic's ledgers collected", timeout_s=60)
        assert _metric(server, "folio_bookie_ledgers") < held
        events: list[str] = []
        with client.reader("kept", serializer=folio.StringSerializer()) as reader:
            def more() -> bool:
                event = reader.read_next(timeout=0.5)
                if event is not None:
                    events.append(event.payload)
                return len(events) >= 10

            wait_for(more, "the kept topic's events", timeout_s=60)
        assert events == [f"kept-{n}" for n in range(10)]
