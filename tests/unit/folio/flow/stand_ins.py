"""A recording Append stream and a plain policy for the engine's tests.

They run on the test's own event loop (pytest-asyncio), not on the SDK's IO
thread: the engine needs nothing but a running loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import grpc

from folio._flow.engine import FlowEngine
from folio._transport.flow_state import FlowState
from folio.api.v1 import append_pb2
from folio.errors import FolioError

SEGMENT = "t/0"


class Stream:
    """Stands in for ``AppendStream``: records commands; the test plays the broker."""

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

    def of(self, kind: str) -> list[append_pb2.AppendCommand]:
        return [c for c in self.sent if c.WhichOneof("command") == kind]

    def blocks(self) -> list[append_pb2.AppendBlock]:
        return [c.append_block for c in self.of("append_block")]


def state(engine: FlowEngine[Any]) -> FlowState:
    """The engine's state (a call, so that mypy does not narrow it across calls)."""
    return engine.state


async def settle() -> None:
    """Lets the loop run what was scheduled with call_soon (a few rounds)."""
    for _ in range(3):
        await asyncio.sleep(0)


def setup(engine: FlowEngine[Any], stream: Stream, last_event_number: int = -1) -> None:
    engine.on_reply(append_pb2.AppendReply(
        request_id=stream.of("setup_append")[-1].request_id,
        append_setup=append_pb2.AppendSetup(segment=SEGMENT,
                                            last_event_number=last_event_number)))


def ack(engine: FlowEngine[Any], command: append_pb2.AppendCommand, offset: int,
        events: int | None = None) -> None:
    """Answers ``command`` written: ``events`` (its own count if None) at ``offset``."""
    block = command.append_block
    engine.on_reply(append_pb2.AppendReply(
        request_id=command.request_id, data_appended=append_pb2.DataAppended(
            event_number=block.last_event_number, offset=offset,
            event_count=block.event_count if events is None else events)))


def refuse(engine: FlowEngine[Any], command: append_pb2.AppendCommand, *,
           retriable: bool) -> None:
    engine.on_reply(append_pb2.AppendReply(
        request_id=command.request_id, append_failed=append_pb2.AppendFailed(
            code=grpc.StatusCode.UNAVAILABLE.value[0], message="bookies down",
            error="BookieUnavailableError", retriable=retriable)))


class Unit:
    """A unit of the plain policy: ``event_count`` events in one block."""

    def __init__(self, name: str, event_count: int = 1) -> None:
        self.name = name
        self.event_count = event_count
        self.last_event_number: int | None = None


class Plain:
    """A policy that records what the engine tells it; one unit per sequence."""

    def __init__(self, window: int = 100) -> None:
        self.window = window
        self.acked: list[tuple[str, int]] = []
        self.abandoned: list[tuple[str, FolioError]] = []
        self.refusals: list[FolioError] = []
        self.handle_refusals = False
        self.sealed_told = 0

    def sequence(self, queue: Sequence[Unit], outstanding: int) -> int:
        return 1 if outstanding < self.window else 0

    def frame(self, group: Sequence[Unit]) -> list[tuple[bytes, int]]:
        return [(unit.name.encode(), unit.event_count) for unit in group]

    def appended(self, group: Sequence[Unit], appended: append_pb2.DataAppended) -> None:
        self.acked.extend((unit.name, appended.offset) for unit in group)

    def settled(self, unit: Unit) -> None:
        self.acked.append((unit.name, -1))

    def refused(self, group: Sequence[Unit] | None, error: FolioError) -> bool:
        self.refusals.append(error)
        return self.handle_refusals

    def abandon(self, units: Sequence[Unit], error: FolioError) -> None:
        self.abandoned.extend((unit.name, error) for unit in units)

    def tick(self, now: float) -> None:
        pass

    def follow_deadline(self) -> float | None:
        return None

    def move_failed(self, error: FolioError) -> None:
        pass

    def sealed(self) -> None:
        self.sealed_told += 1
