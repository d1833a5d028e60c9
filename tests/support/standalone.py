"""``folio standalone`` processes for tests, and raw public-API helpers that need no SDK.

``start_standalone(data_dir)`` starts the real server on free ports and waits
for its ready line; the raw helpers speak the public protocol with the
generated stubs only, so broker tests do not depend on the SDK they help test.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import grpc

from folio.api.v1 import append_pb2, append_pb2_grpc, read_pb2, read_pb2_grpc
from folio.api.v1.block import decode_block, encode_block
from tests.support.bookies import START_TIMEOUT_S, BookieProcess, BookieProcesses

__all__ = ["append_payloads", "read_available", "read_payloads", "start_standalone"]


def start_standalone(processes: BookieProcesses, data_dir: Path, *args: str,
                     timeout_s: float = START_TIMEOUT_S,
                     env: Mapping[str, str] | None = None,
                     module: str = "folio.cli") -> BookieProcess:
    """Start ``folio standalone`` on ``data_dir`` (API and metrics on free ports).

    ``module``: a test launcher to start instead of ``folio.cli`` (it takes
    the same arguments and injects faults, e.g.
    ``tests.support.crash_after_committing``).
    """
    argv = ["standalone", "--data-dir", str(data_dir), "--port", "0", "--metrics-port", "0",
            *args]
    return processes.start_folio(argv, data_dir, timeout_s=timeout_s, env=env, module=module)


def append_payloads(
    channel: grpc.Channel, segment: str, writer_id: str, blocks: Sequence[Sequence[bytes]],
    *, first_event_number: int = 0, timeout_s: float = 30.0, txn_id: bytes = b"",
) -> list[append_pb2.AppendReply]:
    """Append each list of payloads as one block over one Append stream; the replies.

    Event numbers run from ``first_event_number``; the first reply is the
    ``AppendSetup``. ``txn_id``: append in that transaction.
    """
    commands = [append_pb2.AppendCommand(
        request_id=1 << 32, setup_append=append_pb2.SetupAppend(
            segment=segment, writer_id=writer_id, txn_id=txn_id))]
    number = first_event_number - 1
    for sequence, payloads in enumerate(blocks, start=1):
        number += len(payloads)
        commands.append(append_pb2.AppendCommand(
            request_id=(1 << 32) | sequence, append_block=append_pb2.AppendBlock(
                data=encode_block(list(payloads)), event_count=len(payloads),
                last_event_number=number, end=True)))
    stub = append_pb2_grpc.AppendStub(channel)
    return list(stub.Append(iter(commands), timeout=timeout_s))


def read_available(channel: grpc.Channel, segment: str, *,
                   isolation: read_pb2.ReadRequest.Isolation.ValueType =
                   read_pb2.ReadRequest.READ_COMMITTED,
                   timeout_s: float = 30.0) -> list[bytes]:
    """The payloads a reader at ``isolation`` is served from offset 0 before it must wait."""
    stub = read_pb2_grpc.ReadStub(channel)
    call: Any = stub.Read(read_pb2.ReadRequest(segment=segment, max_wait_ms=200,
                                               isolation=isolation), timeout=timeout_s)
    out: list[bytes] = []
    offset = 0
    try:
        for response in call:
            if not response.blocks or response.end_of_segment:
                for block in response.blocks:
                    out.extend(decode_block(block.data).payloads[max(0, offset - block.offset):])
                break
            for block in response.blocks:
                out.extend(decode_block(block.data).payloads[max(0, offset - block.offset):])
                offset = block.offset + block.event_count
    finally:
        call.cancel()
    return out


def read_payloads(channel: grpc.Channel, segment: str, offset: int = 0, *,
                  until_offset: int, timeout_s: float = 30.0) -> list[bytes]:
    """The payloads of ``segment`` from ``offset`` up to ``until_offset`` (exclusive)."""
    stub = read_pb2_grpc.ReadStub(channel)
    call: Any = stub.Read(
        read_pb2.ReadRequest(segment=segment, offset=offset, max_wait_ms=100), timeout=timeout_s)
    start = offset
    out: list[bytes] = []
    try:
        for response in call:
            for block in response.blocks:
                payloads = decode_block(block.data).payloads
                skip = max(0, offset - block.offset)
                out.extend(payloads[skip:])
                offset = block.offset + block.event_count
            if offset >= until_offset or response.end_of_segment:
                break
    finally:
        call.cancel()
    return out[: until_offset - start]
