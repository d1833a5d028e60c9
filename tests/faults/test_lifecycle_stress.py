"""Start and SIGTERM ``folio standalone``, ``folio broker`` and ``folio bookie`` again and again.

Each cycle starts the process on the same data dir, puts a little load on it
(an Append stream, or adds straight to the bookie), sends SIGTERM while the
load runs, and checks the process's stack (``ledger.lifecycle``) stopped it
cleanly: it exits 0 within the harness's deadline (``STOP_TIMEOUT_S``), no
component overran its own deadline (nothing "abandoned" in its log), no
traceback, and the next start finds every acknowledged event or entry.

``make test`` runs ``DEFAULT_CYCLES`` cycles of each; ``FOLIO_LIFECYCLE_CYCLES=50``
runs more. Each test prints its figures (start and stop seconds: median, 95th
percentile, max) on the terminal.
"""

from __future__ import annotations

import asyncio
import os
import signal
import statistics
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from folio.api.v1 import admin_pb2, admin_pb2_grpc, append_pb2, append_pb2_grpc
from folio.api.v1.block import encode_block
from ledger.api import AddRequest
from ledger.bookie.remote import GrpcBookieClient
from ledger.errors import LedgerError
from tests.support.bookies import START_TIMEOUT_S, STOP_TIMEOUT_S, BookieProcess, BookieProcesses

#: Cycles per process kind under ``make test``.
DEFAULT_CYCLES = 5
CYCLES = int(os.environ.get("FOLIO_LIFECYCLE_CYCLES", DEFAULT_CYCLES))
#: A cycle's worst case on a loaded machine: a start, the load, a stop.
_CYCLE_S = 90

pytestmark = [pytest.mark.faults, pytest.mark.timeout(120 + _CYCLE_S * CYCLES)]

#: Events (or entries) acknowledged in a cycle before its SIGTERM.
LOAD_BEFORE_STOP = 200
BLOCK_EVENTS = 20
#: Starts are not what is tested: a loaded machine gets more time for them.
START_S = 4 * START_TIMEOUT_S


class _Figures:
    """Start and stop durations of one kind of process, printed at the end."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.starts: list[float] = []
        self.stops: list[float] = []

    def line(self) -> str:
        def spread(values: list[float]) -> str:
            ordered = sorted(values)
            p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
            return (f"median {statistics.median(ordered):.2f} p95 {p95:.2f} "
                    f"max {ordered[-1]:.2f}")

        return (f"lifecycle stress, {self.kind}: {len(self.stops)} cycles, every exit 0; "
                f"start s: {spread(self.starts)}; stop s: {spread(self.stops)}")


def _wait_exit(process: BookieProcess, since: float, log_from: int) -> float:
    """Wait for the SIGTERMed ``process``; its stop's seconds. Exit 0 and a clean log asserted."""
    try:
        code = process.process.wait(STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.process.send_signal(signal.SIGUSR2)  # its stacks into the log first
        time.sleep(1)
        process.kill()
        raise AssertionError(f"pid {process.pid} did not exit {STOP_TIMEOUT_S} s after "
                             f"SIGTERM; log:\n{process.log()[log_from:]}") from None
    took = time.monotonic() - since
    if process.process.stdout is not None:
        process.process.stdout.close()
    log = process.log()[log_from:]
    assert code == 0, log[-3000:]
    assert "abandoned" not in log, log[-3000:]
    assert "Traceback" not in log, log[-3000:]
    assert "stopped" in log
    return took


def _log_size(data_dir: Path) -> int:
    log = data_dir.with_name(data_dir.name + ".log")
    return len(log.read_text(errors="replace")) if log.exists() else 0


def _commands(writer_id: str, stop: threading.Event) -> Iterator[append_pb2.AppendCommand]:
    flow = 1 << 32
    yield append_pb2.AppendCommand(request_id=flow, setup_append=append_pb2.SetupAppend(
        segment="stress/0", writer_id=writer_id))
    number = 0
    sequence = 1
    while not stop.is_set():
        payloads = [b"%s-%08d" % (writer_id.encode(), n)
                    for n in range(number, number + BLOCK_EVENTS)]
        number += BLOCK_EVENTS
        yield append_pb2.AppendCommand(request_id=flow | sequence, append_block=(
            append_pb2.AppendBlock(data=encode_block(payloads), event_count=BLOCK_EVENTS,
                                   last_event_number=number - 1, end=True)))
        sequence += 1


def _broker_cycle(server: BookieProcess, cycle: int, acked_before: int) -> tuple[int, float]:
    """Check the events of earlier cycles, append until SIGTERM; (events acked, SIGTERM time)."""
    with grpc.insecure_channel(server.address) as channel:
        admin = admin_pb2_grpc.AdminStub(channel)
        if cycle == 0:
            admin.CreateTopic(admin_pb2.CreateTopicRequest(name="stress"), timeout=30)
        info = admin.GetSegmentInfo(admin_pb2.GetSegmentInfoRequest(segment="stress/0"),
                                    timeout=30)
        # Every append a stopping broker started was answered: the segment ends where the acks did.
        assert info.segment.end_offset == acked_before
        stop = threading.Event()
        acked = 0
        signalled = 0.0
        replies = append_pb2_grpc.AppendStub(channel).Append(
            _commands(f"w{cycle}", stop), timeout=60)
        try:
            for reply in replies:
                if reply.HasField("data_appended"):
                    assert reply.data_appended.offset == acked_before + acked
                    acked += reply.data_appended.event_count
                    if acked >= LOAD_BEFORE_STOP and not stop.is_set():
                        stop.set()  # the generator sends a few more blocks at most
                        signalled = time.monotonic()
                        server.process.send_signal(signal.SIGTERM)
        except grpc.RpcError as ended:
            assert ended.code() == grpc.StatusCode.UNAVAILABLE, ended
        assert stop.is_set()
    return acked, signalled


def _cycle_brokers(processes: BookieProcesses, figures: _Figures, data_dir: Path,
                   args: tuple[str, ...], command: str) -> None:
    acked = 0
    for cycle in range(CYCLES):
        log_from = _log_size(data_dir)
        began = time.monotonic()
        server = processes.start_folio(
            [command, "--data-dir", str(data_dir), "--port", "0", "--metrics-port", "0", *args],
            data_dir, timeout_s=START_S)
        figures.starts.append(time.monotonic() - began)
        more, signalled = _broker_cycle(server, cycle, acked)
        acked += more
        figures.stops.append(_wait_exit(server, signalled, log_from))


def test_standalone_stops_cleanly_every_time(bookie_processes: BookieProcesses,
                                             tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    figures = _Figures("folio standalone")
    _cycle_brokers(bookie_processes, figures, tmp_path / "data", (), "standalone")
    with capsys.disabled():
        print(f"\n{figures.line()}")


def test_broker_stops_cleanly_every_time(bookie_processes: BookieProcesses, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    bookie = bookie_processes.start(tmp_path / "bookie", "--max-entry-bytes", "17825792",
                                    timeout_s=START_S)
    figures = _Figures("folio broker --bookies")
    _cycle_brokers(bookie_processes, figures, tmp_path / "broker", ("--bookies", bookie.address),
                   "broker")
    assert bookie.terminate() == 0
    with capsys.disabled():
        print(f"\n{figures.line()}")


async def _add_until_stopped(bookie: BookieProcess, ledger_id: int) -> tuple[int, float]:
    """Add entries one by one; SIGTERM once ``LOAD_BEFORE_STOP`` are acknowledged; go on
    until refused. (entries acknowledged, SIGTERM time)."""
    client = GrpcBookieClient(bookie.address)
    acked = 0
    signalled = 0.0
    try:
        while True:
            data = b"entry-%08d" % acked
            try:
                await client.add_entries(AddRequest(
                    ledger_id, range(acked, acked + 1), [len(data) * (acked + 1)], [data],
                    last_add_confirmed=acked - 1))
            except LedgerError:
                break  # the stopping bookie refuses, or is gone
            acked += 1
            if acked == LOAD_BEFORE_STOP:
                signalled = time.monotonic()
                bookie.process.send_signal(signal.SIGTERM)
            if acked > 100 * LOAD_BEFORE_STOP:
                raise AssertionError("the bookie still takes adds long after its SIGTERM")
    finally:
        await client.close()
    assert signalled > 0
    return acked, signalled


async def _read_back(bookie: BookieProcess, ledger_id: int, acked: int) -> None:
    client = GrpcBookieClient(bookie.address)
    try:
        datas: list[bytes] = []
        while len(datas) < acked:
            result = await client.read_entries(ledger_id, len(datas), acked - 1)
            datas.extend(result.datas)
        assert datas[:acked] == [b"entry-%08d" % n for n in range(acked)]
    finally:
        await client.close()


async def test_bookie_stops_cleanly_every_time(bookie_processes: BookieProcesses,
                                               tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    figures = _Figures("folio bookie")
    data_dir = tmp_path / "bookie"
    previous: tuple[int, int] | None = None
    for cycle in range(CYCLES):
        log_from = _log_size(data_dir)
        began = time.monotonic()
        bookie = await asyncio.to_thread(bookie_processes.start, data_dir, timeout_s=START_S)
        figures.starts.append(time.monotonic() - began)
        if previous is not None:  # every entry acknowledged before the stop is there
            await _read_back(bookie, *previous)
        acked, signalled = await _add_until_stopped(bookie, cycle + 1)
        previous = (cycle + 1, acked)
        figures.stops.append(await asyncio.to_thread(_wait_exit, bookie, signalled, log_from))
    with capsys.disabled():
        print(f"\n{figures.line()}")
