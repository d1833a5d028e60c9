"""A bookie lost under a running ``folio broker``: the broker says so, at once, and so does the CLI.

Issue 13: with its only bookie killed, ``folio produce`` hung for 60 s and then
printed "no broker at ..." although the broker was up. Now the broker answers
UNAVAILABLE naming the bookie and what failed; the writer retries it (it may be
a short outage) until the client's ``timeout_s``, and the CLI then prints that
message (the ledger service is unavailable).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import grpc
import pytest

import folio
from folio.api.v1 import append_pb2, append_pb2_grpc
from tests.support.bookies import BookieProcesses, folio_argv, folio_env

pytestmark = pytest.mark.faults

#: Far above the few seconds it takes; a hang (the old 60 s) would exceed it.
_HANG_S = 45


def _produce(endpoint: str, text: str,
             timeout_s: str | None = None) -> subprocess.CompletedProcess[str]:
    env = folio_env({"FOLIO_CLIENT_TIMEOUT_S": timeout_s} if timeout_s else None)
    return subprocess.run(folio_argv("produce", "lost", "--endpoint", endpoint), input=text,
                          env=env, capture_output=True, text=True, timeout=_HANG_S,
                          check=False)


def test_a_lost_bookie_is_named_and_the_cli_says_so(
        tmp_path: Path, bookie_processes: BookieProcesses) -> None:
    bookie = bookie_processes.start(tmp_path / "bookie")
    broker = bookie_processes.start_folio(
        ["broker", "--data-dir", str(tmp_path / "broker"), "--port", "0", "--metrics-port", "0",
         "--bookies", bookie.address], tmp_path / "broker")
    with folio.Client(broker.address) as client:
        client.create_topic("lost")
    first = _produce(broker.address, "one\n")
    assert first.returncode == 0, first.stderr

    assert bookie.kill() == -9

    with grpc.insecure_channel(broker.address) as channel, \
            pytest.raises(grpc.RpcError) as raised:
        append_pb2_grpc.ProduceStub(channel).Produce(append_pb2.ProduceRequest(
            topic="lost", events=[append_pb2.ProduceEvent(payload=b"x")]), timeout=_HANG_S)
    error = raised.value
    assert error.code() is grpc.StatusCode.UNAVAILABLE
    assert bookie.address in (error.details() or "")

    # The writer retries the unavailable ledger service until the client's
    # timeout_s (5 s here), then the CLI names what it retried.
    second = _produce(broker.address, "two\n", timeout_s="5")
    assert second.returncode == 1
    assert "is up but its ledger service is unavailable" in second.stderr, second.stderr
    assert bookie.address in second.stderr
    assert "no broker at" not in second.stderr
    assert "(0 of 1 events acknowledged)" in second.stderr
    assert broker.running()
