"""What reusing a ``writer_id`` across process restarts de-duplicates, and what it does not.

docs/sdk.md ("Reusing a writer_id across restarts") states it; this checks it
against a real ``folio standalone``. A first process (a real one, exited)
writes with ``writer_id="orders-1"``; then, as a restarted process:

* re-sending that process's last block with the same event numbers (what a
  writer that crashed before its acknowledgement and kept the numbered block
  would do) is answered as a duplicate and not stored again;
* an SDK writer opened again with the same id numbers its events after the
  recorded last number, so writing the same payloads again stores them again:
  the SDK does not de-duplicate what the application re-writes;
* once the writer was idle longer than ``writer_expiry_ms`` and the segment
  forgot it, the same re-sent block is written again.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import grpc
import pytest

import folio
from folio.api.v1 import append_pb2, append_pb2_grpc
from tests.support.bookies import BookieProcess, BookieProcesses, folio_env
from tests.support.standalone import append_payloads, read_available, start_standalone
from tests.support.wait import wait_for

WRITER = "orders-1"
PAYLOADS = [b"a", b"b", b"c"]

#: The first process: writes PAYLOADS as one block (one flush) with WRITER's id, then exits.
_FIRST_PROCESS = """
import sys, folio
with folio.Client(sys.argv[1], timeout_s=30) as client:
    with client.writer(sys.argv[2], writer_id=sys.argv[3], linger_ms=10_000) as writer:
        futures = [writer.write_event(p) for p in (b"a", b"b", b"c")]
        writer.flush(timeout=30)
        print(",".join(str(f.result(timeout=0).offset) for f in futures))
"""


def _first_process(address: str, topic: str) -> list[int]:
    done = subprocess.run([sys.executable, "-c", _FIRST_PROCESS, address, topic, WRITER],
                          capture_output=True, text=True, timeout=120, env=folio_env(),
                          check=False)
    assert done.returncode == 0, done.stderr
    return [int(offset) for offset in done.stdout.strip().split(",")]


def _last_event_number(channel: grpc.Channel, segment: str) -> int:
    setup = append_pb2.AppendCommand(request_id=1 << 32, setup_append=append_pb2.SetupAppend(
        segment=segment, writer_id=WRITER))
    replies = append_pb2_grpc.AppendStub(channel).Append(iter([setup]), timeout=30)
    return next(iter(replies)).append_setup.last_event_number


@pytest.fixture(scope="module")
def expiring_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BookieProcess]:
    """A standalone that forgets writers idle for 1 s, checked every second."""
    processes = BookieProcesses()
    started = start_standalone(processes, tmp_path_factory.mktemp("expiring") / "data",
                               "--writer-expiry-ms", "1000", "--retention-interval-s", "1")
    yield started
    try:
        started.terminate()
    finally:
        processes.kill_all()


def test_a_restarted_process_resending_its_last_block_gets_a_duplicate(
        server: BookieProcess, client: folio.Client) -> None:
    client.create_topic("reuse")
    assert _first_process(server.address, "reuse") == [0, 1, 2]
    with grpc.insecure_channel(server.address) as channel:
        # The broker remembers the writer's last number across the first process's exit.
        assert _last_event_number(channel, "reuse/0") == 2
        again = append_payloads(channel, "reuse/0", WRITER, [PAYLOADS])
        assert again[0].append_setup.last_event_number == 2
        assert again[1].data_appended.duplicate
        assert read_available(channel, "reuse/0") == PAYLOADS  # not stored twice

    # The SDK numbers a reopened writer's events after the recorded number: the
    # same payloads written again are new events, stored again.
    with client.writer("reuse", writer_id=WRITER) as writer:
        futures = [writer.write_event(payload) for payload in PAYLOADS]
        writer.flush(timeout=30)
    assert [f.result(timeout=0).offset for f in futures] == [3, 4, 5]
    with grpc.insecure_channel(server.address) as channel:
        assert read_available(channel, "reuse/0") == PAYLOADS + PAYLOADS
        assert _last_event_number(channel, "reuse/0") == 5


def test_after_writer_expiry_the_resent_block_is_written_again(
        expiring_server: BookieProcess) -> None:
    with folio.Client(expiring_server.address, timeout_s=30) as client:
        client.create_topic("expiring")
    assert _first_process(expiring_server.address, "expiring") == [0, 1, 2]
    with grpc.insecure_channel(expiring_server.address) as channel:
        wait_for(lambda: _last_event_number(channel, "expiring/0") == -1,
                 "the segment to forget the idle writer", timeout_s=120)
        again = append_payloads(channel, "expiring/0", WRITER, [PAYLOADS])
        assert again[0].append_setup.last_event_number == -1
        assert not again[1].data_appended.duplicate
        assert read_available(channel, "expiring/0") == PAYLOADS + PAYLOADS
