"""The bookie's journal under real SIGKILLs: during group commits, checkpoints and replay.

Each test runs ``folio bookie`` (journal on, ``sync``) as a real process, keeps
writers adding over gRPC, SIGKILLs it while adds are in flight, restarts it on
the same directories and reads back every acknowledged entry, byte for byte.
An add that failed (the kill cut it) is unknown: it may or may not be there,
and is not checked.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from ledger.api import AddRequest
from ledger.bookie.journal import journal_files
from ledger.bookie.remote import GrpcBookieClient
from ledger.errors import LedgerError
from tests.support.bookies import BookieProcesses, folio_argv, folio_env

pytestmark = pytest.mark.faults

DEADLINE_S = 60.0


class _Writer:
    """Adds entries to one ledger, one request at a time, and remembers the acknowledged."""

    def __init__(self, ledger_id: int, entry_bytes: int, per_request: int) -> None:
        self.ledger_id = ledger_id
        self.entry_bytes = entry_bytes
        self.per_request = per_request
        self.acknowledged: list[bytes] = []
        self.length = 0
        self.error: LedgerError | None = None
        self.killed = False

    async def run(self, client: GrpcBookieClient) -> None:
        while True:
            first = len(self.acknowledged)
            datas = [os.urandom(self.entry_bytes) for _ in range(self.per_request)]
            lengths = []
            length = self.length
            for data in datas:
                length += len(data)
                lengths.append(length)
            request = AddRequest(self.ledger_id, range(first, first + len(datas)), lengths,
                                 datas, last_add_confirmed=first - 1)
            while True:
                try:
                    await client.add_entries(request)
                    break
                except LedgerError as error:
                    self.error = error
                    if self.killed or not error.retriable:
                        return  # the kill: this add's outcome is unknown
                    # Not the kill (a deadline on a loaded machine): unknown, so send
                    # the same entries again (a bookie's puts are idempotent).
            self.acknowledged.extend(datas)
            self.length = length


async def _load_then_kill(bookie_processes: BookieProcesses, data_dir: Path,
                          writers: list[_Writer], acknowledged: int, *args: str) -> None:
    """Run the writers until ``acknowledged`` entries are, then SIGKILL the bookie mid-load."""
    bookie = bookie_processes.start(data_dir, "--durability", "sync", *args)
    client = GrpcBookieClient(bookie.address)
    try:
        tasks = [asyncio.create_task(writer.run(client)) for writer in writers]
        deadline = time.monotonic() + DEADLINE_S
        while sum(len(writer.acknowledged) for writer in writers) < acknowledged:
            assert time.monotonic() < deadline, "the writers made no progress"
            assert not all(task.done() for task in tasks), (
                [repr(writer.error) for writer in writers], bookie.log())
            await asyncio.sleep(0.01)
        # Adds are in flight now: each writer has one outstanding.
        for writer in writers:
            writer.killed = True
        assert bookie.kill() == -signal.SIGKILL
        await asyncio.wait_for(asyncio.gather(*tasks), DEADLINE_S)
    finally:
        await client.close()


async def _check(bookie_processes: BookieProcesses, data_dir: Path,
                 writers: list[_Writer], *args: str) -> None:
    bookie = bookie_processes.start(data_dir, *args)
    client = GrpcBookieClient(bookie.address)
    try:
        for writer in writers:
            count = len(writer.acknowledged)
            if count == 0:
                continue
            read: list[bytes] = []
            while len(read) < count:
                result = await client.read_entries(writer.ledger_id, len(read), count - 1)
                assert result.entry_ids == list(range(len(read), len(read) + len(result.datas)))
                read.extend(result.datas)
            assert read == writer.acknowledged, f"ledger {writer.ledger_id}"
            tail = await client.read_last_add_confirmed(writer.ledger_id)
            assert tail.last_entry_id >= count - 1
    finally:
        await client.close()
    assert bookie.kill() == -signal.SIGKILL


async def test_acknowledged_adds_survive_sigkill_during_group_commits(
        tmp_path: Path, bookie_processes: BookieProcesses) -> None:
    writers = [_Writer(ledger_id, 100 if ledger_id % 2 else 1024, 20) for ledger_id in range(4)]
    # The journal in a directory of its own, as on a disk of its own.
    journal = ("--journal-dir", str(tmp_path / "journal"))
    await _load_then_kill(bookie_processes, tmp_path / "bookie", writers, 2_000, *journal)
    assert journal_files(str(tmp_path / "journal"))
    assert not (tmp_path / "bookie" / "journal").exists()
    await _check(bookie_processes, tmp_path / "bookie", writers, *journal)


async def test_acknowledged_adds_survive_sigkills_during_checkpoints(
        tmp_path: Path, bookie_processes: BookieProcesses) -> None:
    # 64 KiB journal files: under this load a checkpoint (RocksDB flush, marker,
    # deletes) runs every few group commits, so the kills land in and around them.
    writers: list[_Writer] = []
    for round_ in range(3):
        writers += [_Writer(10 * round_ + index, 4096, 4) for index in range(3)]
        await _load_then_kill(bookie_processes, tmp_path / "bookie", writers[-3:], 300,
                              "--journal-file-bytes", "65536")
        await _check(bookie_processes, tmp_path / "bookie", writers)
    assert len(journal_files(str(tmp_path / "bookie" / "journal"))) < 10


def _kill_while_replaying(data_dir: Path, log_path: Path) -> None:
    """Start a bookie on ``data_dir`` and SIGKILL it once it says it is replaying."""
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            folio_argv("bookie", "--data-dir", str(data_dir), "--port", "0",
                       "--metrics-port", "0"),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log, env=folio_env())
    try:
        deadline = time.monotonic() + DEADLINE_S
        while "replaying from file" not in log_path.read_text(errors="replace"):
            assert process.poll() is None, log_path.read_text(errors="replace")
            assert time.monotonic() < deadline, "the bookie never started replaying"
            time.sleep(0.002)  # polling the log, under the deadline above
    finally:
        process.kill()
        process.wait()


async def test_acknowledged_adds_survive_sigkill_during_replay(
        tmp_path: Path, bookie_processes: BookieProcesses) -> None:
    data_dir = tmp_path / "bookie"
    writers = [_Writer(ledger_id, 4096, 50) for ledger_id in range(2)]
    # Large journal files: no checkpoint, the whole journal is replayed at start.
    await _load_then_kill(bookie_processes, data_dir, writers, 4_000)

    _kill_while_replaying(data_dir, tmp_path / "replay.log")
    await _check(bookie_processes, data_dir, writers)
