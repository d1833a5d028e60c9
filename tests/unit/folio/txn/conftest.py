"""Helpers and fixtures shared by the tests of this folder (moved from test_txn.py)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from folio._transport.io_thread import IoThread
from folio.api.v1 import append_pb2
from folio.api.v1.block import decode_block
from folio.errors import (
    FolioUnavailableError,
)
from folio.models import SegmentRange, TopicConfig, TopicInfo
from folio.txn.txn import (
    SingleRoutingKeyTransactionWriter,
)

SEGMENT = "t/0"
MiB = 1024 * 1024
WAIT_S = 5.0


class RecordingStream:
    """Stands in for the pool/``AppendStream``: records commands, the test plays the broker."""

    def __init__(self) -> None:
        self.flows: dict[int, Any] = {}
        self.sent: list[append_pb2.AppendCommand] = []
        self.connected = True
        self._sequence = 0

    def open_flow(self, flow: Any) -> tuple[Any, int]:
        self.flows[1] = flow
        if self.connected:
            asyncio.get_running_loop().call_soon(flow.on_stream_ready)
        return self, 1

    def unregister(self, flow_id: int) -> None:
        self.flows.pop(flow_id, None)

    def send(self, flow_id: int, command: append_pb2.AppendCommand) -> int | None:
        if not self.connected:
            return None
        self._sequence += 1
        command.request_id = flow_id << 32 | self._sequence
        self.sent.append(command)
        return self._sequence


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _topic(max_event_bytes: int = 4 * MiB) -> TopicInfo:
    config = TopicConfig(retention_ms=-1, retention_bytes=-1, max_event_bytes=max_event_bytes,
                         ledger_rollover_bytes=1 << 30, ledger_rollover_ms=3_600_000)
    return TopicInfo("t", config, (SegmentRange(SEGMENT, 0, 0.0, 1.0, False, 0, 0),), 0)


class Harness:
    def __init__(self, io: IoThread, *, txn_timeout_ms: int = 60_000,
                 clock: Any = None, serializer: Any = None) -> None:
        self.io = io
        self.stream = RecordingStream()
        options: dict[str, Any] = {} if clock is None else {"clock": clock}
        self.writer: SingleRoutingKeyTransactionWriter[Any] = SingleRoutingKeyTransactionWriter(
            _topic(), "key", serializer or _Bytes(), io=io,
            source=self.stream,
            txn_timeout_ms=txn_timeout_ms, writer_id="w", **options)
        self.sync()

    @property
    def flow(self) -> Any:
        return self.stream.flows[1]

    def sync(self) -> None:
        """Waits until the IO thread ran everything queued so far (call_soon chains)."""
        for _ in range(3):
            self.io.run(asyncio.sleep(0), timeout=WAIT_S)

    def on_io(self, fn: Any, *args: Any) -> None:
        async def call() -> None:
            fn(*args)
        self.io.run(call(), timeout=WAIT_S)
        self.sync()

    def commands(self, kind: str) -> list[append_pb2.AppendCommand]:
        return [c for c in self.stream.sent if c.WhichOneof("command") == kind]

    def blocks(self) -> list[append_pb2.AppendBlock]:
        return [c.append_block for c in self.commands("append_block")]

    def reply(self, command: append_pb2.AppendCommand, **reply: Any) -> None:
        message = append_pb2.AppendReply(request_id=command.request_id, **reply)
        self.on_io(self.flow.on_reply, message)

    def setup(self, last_event_number: int = -1) -> None:
        self.reply(self.commands("setup_append")[-1],
                   append_setup=append_pb2.AppendSetup(segment=SEGMENT,
                                                       last_event_number=last_event_number))

    def ack_end(self, offset: int, *, duplicate: bool = False, count: int | None = None) -> None:
        end = [c for c in self.commands("append_block") if c.append_block.end][-1]
        block = end.append_block
        events = sum(b.event_count for b in self.blocks()[-self._sequence_length():])
        self.reply(end, data_appended=append_pb2.DataAppended(
            event_number=block.last_event_number, offset=-1 if duplicate else offset,
            event_count=0 if duplicate else (events if count is None else count),
            duplicate=duplicate))

    def _sequence_length(self) -> int:
        blocks = self.blocks()
        length = 1
        while length < len(blocks) and not blocks[-length - 1].end:
            length += 1
        return length

    def lose_stream(self) -> None:
        self.stream.connected = False
        self.on_io(self.flow.on_stream_lost, FolioUnavailableError("cut"))

    def restore_stream(self) -> None:
        self.stream.connected = True
        self.on_io(self.flow.on_stream_ready)


class _Bytes:
    def serialize(self, value: bytes) -> bytes:
        return value

    def deserialize(self, data: bytes) -> bytes:
        return data


@pytest.fixture
def io() -> Iterator[IoThread]:
    thread = IoThread("test-txn-io")
    yield thread
    thread.close()


@pytest.fixture
def harness(io: IoThread) -> Harness:
    made = Harness(io)
    made.setup()
    return made


def _payloads(blocks: list[append_pb2.AppendBlock]) -> list[bytes]:
    return [p for block in blocks for p in decode_block(block.data).payloads]


# -- the caller's side ------------------------------------------------------------


def _wait_for(get: Any, timeout: float = WAIT_S) -> Any:
    """Polls ``get()`` until it is truthy; fails after ``timeout``."""
    deadline = time.monotonic() + timeout
    tick = threading.Event()
    while time.monotonic() < deadline:
        value = get()
        if value:
            return value
        tick.wait(0.01)
    raise AssertionError("condition not met in time")


def _big_txn(harness: Harness, megabytes: int = 3) -> Any:
    txn = harness.writer.begin()
    for index in range(megabytes * 4):
        txn.write_event(bytes([index]) * (256 * 1024 - 100))
    return txn
