"""A process forked after its client was closed: the child's own client works.

Each run is a real program (``tests.support.fork_script``) against the
module's real ``folio standalone``, forking a real child (``multiprocessing``'s
"fork" method, or ``os.fork``). Before the fix the child died of SIGSEGV
(multiprocessing) or never connected (``os.fork``): the closed client's
channels kept gRPC's asyncio state (its poller thread) alive, and the child
inherited it without its threads (``folio._transport.fork``). A child forked
while a client is still open is refused with ``ForkedProcessError``, never
crashed, and the parent goes on.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

import folio
from tests.integration.test_txn import read_topic
from tests.support.bookies import BookieProcess, folio_env

RUN_TIMEOUT_S = 180.0


def _run(server: BookieProcess, topic: str, mode: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "tests.support.fork_script", server.address, topic, mode],
        capture_output=True, env=folio_env(), timeout=RUN_TIMEOUT_S, check=False)
    stdout = result.stdout.decode(errors="replace")
    assert result.returncode == 0, (stdout, result.stderr.decode(errors="replace"))
    return stdout


@pytest.mark.parametrize("mode", ["closed-mp", "closed-os", "closed-aio"])
def test_a_child_forked_after_close_writes_with_its_own_client(
        server: BookieProcess, client: folio.Client, mode: str) -> None:
    topic = f"fork-{mode}"
    stdout = _run(server, topic, mode)
    assert "child exit 0" in stdout.splitlines(), stdout
    assert any(line.startswith("child wrote ") for line in stdout.splitlines()), stdout
    assert sorted(event.payload for event in read_topic(client, topic)) == [b"child",
                                                                           b"parent"]
