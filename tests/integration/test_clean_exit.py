"""A client program exits cleanly: exit code 0, nothing on stderr, closed or not.

Each run is a real subprocess against the module's real ``folio standalone``:
``tests.support.exit_script`` (a client that writes and reads one event, then
ends as the mode says) and the CLI's ``perf consume`` and ``consume`` with
``--max-events``. A client never closed is closed by the SDK's exit handler
(``folio._transport.io_thread``): its channels, then its loop, before the
interpreter finalizes (else gRPC's poller prints "RuntimeError: Event loop is
closed" with a traceback).
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.bookies import BookieProcess, folio_argv, folio_env

RUN_TIMEOUT_S = 120.0


def _run(argv: list[str]) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(argv, capture_output=True, env=folio_env(), timeout=RUN_TIMEOUT_S,
                          check=False)


def _assert_clean(result: subprocess.CompletedProcess[bytes]) -> None:
    stderr = result.stderr.decode(errors="replace")
    assert result.returncode == 0, stderr
    assert "Traceback" not in stderr and "Event loop is closed" not in stderr, stderr


@pytest.mark.parametrize("mode", ["close", "with", "open", "reader-open"])
def test_a_client_program_exits_cleanly(server: BookieProcess, mode: str) -> None:
    result = _run([sys.executable, "-m", "tests.support.exit_script", server.address,
                   f"clean-exit-{mode}", mode])
    _assert_clean(result)
    assert result.stderr == b""


def test_cli_readers_exit_cleanly(server: BookieProcess) -> None:
    endpoint = ["--endpoint", server.address]
    _assert_clean(_run(folio_argv("perf", "produce", "--topic", "clean-exit-cli",
                                  "--duration-s", "1", *endpoint)))
    consume = _run(folio_argv("perf", "consume", "--topic", "clean-exit-cli", "--from-beginning",
                              "--max-events", "50", *endpoint))
    _assert_clean(consume)
    assert consume.stderr == b""
    plain = _run(folio_argv("consume", "clean-exit-cli", "--from-beginning", "--max-events", "5",
                            *endpoint))
    _assert_clean(plain)
    assert plain.stderr == b"" and plain.stdout  # 5 binary payloads (perf's)
