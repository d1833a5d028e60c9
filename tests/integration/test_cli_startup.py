"""The CLI's first request imports what it needs: gRPC and the admin calls, nothing else.

Against a real ``folio standalone``; what is asserted is which modules the
process imported (``tests.support.cli_imports``), never how long it took
(``python -m bench.cli_startup`` measures that, docs/cli.md "Start-up").
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from folio.cli import CLIENT_COMMANDS
from tests.support.bookies import BookieProcess, folio_env
from tests.support.cli_imports import ENTRY_POINTS, run_recording_imports

#: Seconds a CLI run may take before the test gives up on it (not a timing assertion).
RUN_TIMEOUT_S = 120


def _create(server: BookieProcess, topic: str) -> None:
    created = subprocess.run([sys.executable, "-m", "folio.cli", "--endpoint", server.address,
                              "topic", "create", topic], capture_output=True,
                             text=True, env=folio_env(), timeout=RUN_TIMEOUT_S, check=False)
    assert created.returncode == 0, created.stderr


@pytest.mark.parametrize("entry", ENTRY_POINTS, ids=lambda entry: entry[-1])
def test_topic_list_imports_no_metrics_reader_writer_nor_other_commands(
        server: BookieProcess, entry: tuple[str, ...]) -> None:
    topic = f"startup-listed-{ENTRY_POINTS.index(entry)}"
    _create(server, topic)
    done, modules = run_recording_imports(entry, "--endpoint", server.address,
                                          "topic", "list", env=folio_env())
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"{topic}\t1" in done.stdout.splitlines()
    assert {"grpc", "folio.client", "folio.admin", "folio.cli.topic"} <= modules  # it did call
    assert not any(m.split(".")[0] == "prometheus_client" for m in modules)
    unneeded = {"folio.metrics", "folio.read.reader", "folio.write.writer", "folio.txn.txn",
                "folio.txn.txn_full", "importlib.metadata", "hdrh"}
    assert not unneeded & modules
    others = {module for name, (module, _help) in CLIENT_COMMANDS.items() if name != "topic"}
    assert not others & modules


def test_produce_loads_the_metrics_it_records(server: BookieProcess) -> None:
    # The other side: a writer's client registers its metrics (folio.metrics).
    _create(server, "startup-produced")
    done, modules = run_recording_imports(ENTRY_POINTS[0], "--endpoint", server.address,
                                          "produce", "startup-produced", stdin="one\n",
                                          env=folio_env())
    assert done.returncode == 0, done.stderr[-2000:]
    assert "1 events acknowledged" in done.stderr
    assert {"folio.metrics", "prometheus_client", "folio.write.writer"} <= modules
