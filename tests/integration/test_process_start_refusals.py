"""A ``folio standalone`` that cannot start says why in one line and exits 1.

Each refusal happens at a different height of the process's component stack
(``ledger.lifecycle``): the data dir's store (another process holds it), the
topics (a setting the snapshot records cannot hold), the metrics server and
the gRPC server (a taken port). The components started below it stop again,
nothing is printed on stdout (no ready line), and no traceback is logged.
"""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

from tests.support.bookies import BookieProcesses, folio_argv, folio_env
from tests.support.standalone import start_standalone

RUN_TIMEOUT_S = 120.0


def _refused(data_dir: Path, *args: str) -> str:
    """Run ``folio standalone`` expecting a refusal; its error line."""
    done = subprocess.run(
        folio_argv("standalone", "--data-dir", str(data_dir), "--port", "0",
                   "--metrics-port", "0", *args),
        capture_output=True, text=True, env=folio_env(), timeout=RUN_TIMEOUT_S, check=False)
    assert done.returncode == 1, done.stderr
    assert done.stdout == ""
    assert "Traceback" not in done.stderr, done.stderr
    errors = [line for line in done.stderr.splitlines()
              if line.startswith("folio standalone: error: ")]
    assert len(errors) == 1, done.stderr
    return errors[0]


def test_a_data_dir_in_use_is_refused_and_the_first_goes_on(
        bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    first = start_standalone(bookie_processes, tmp_path / "data")
    line = _refused(tmp_path / "data")
    assert line.endswith(f"(is another folio process using {tmp_path / 'data'}?)")
    assert first.running()
    assert first.terminate() == 0


def test_a_setting_the_topics_refuse_stops_what_started_below(tmp_path: Path) -> None:
    line = _refused(tmp_path / "data", "--txn-snapshot-chunk-bytes", str(1 << 40))
    assert "exceeds the largest snapshot record" in line
    # The store and the bookie below were closed: the next start opens them, and
    # is refused higher up, at the metrics server.
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        line = _refused(tmp_path / "data", "--metrics-port", str(port))
    assert line.startswith(f"folio standalone: error: cannot serve metrics on 127.0.0.1:{port}")


def test_a_taken_port_is_refused(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        line = _refused(tmp_path / "data", "--port", str(port))
    assert f"127.0.0.1:{port}" in line
