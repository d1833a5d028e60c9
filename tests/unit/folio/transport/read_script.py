"""A scripted Read stub for the read streams' and readers' unit tests: each Read call answers
with the next script (responses, then maybe a cut connection, then the tail)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, cast

import grpc

from folio.api.v1 import read_pb2
from folio.api.v1.block import encode_block

if TYPE_CHECKING:  # only in the .pyi: grpc has no asyncio stub class at run time
    from folio.api.v1.read_pb2_grpc import ReadAsyncStub

__all__ = ["Stub", "json_response", "read_stub", "response"]


class Unavailable(grpc.RpcError):
    """A cut connection as ``grpc.aio`` reports it (retriable)."""

    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAVAILABLE

    def details(self) -> str:
        return "connection cut"


class Call:
    """One scripted Read call: its responses, then maybe an error, then the tail."""

    def __init__(self, responses: list[read_pb2.ReadResponse], error: bool) -> None:
        self._responses = responses
        self._error = error

    def __aiter__(self) -> AsyncIterator[read_pb2.ReadResponse]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[read_pb2.ReadResponse]:
        for response in self._responses:
            yield response
        if self._error:
            raise Unavailable()

    def cancel(self) -> None:
        pass


class Stub:
    """Answers each Read with the next script; records the offsets asked for."""

    def __init__(self, *scripts: tuple[list[read_pb2.ReadResponse], bool]) -> None:
        self._scripts = list(scripts)
        self.offsets: list[int] = []

    def Read(self, request: read_pb2.ReadRequest) -> Call:
        self.offsets.append(request.offset)
        responses, error = self._scripts.pop(0) if self._scripts else ([], False)
        return Call(responses, error)


def read_stub(stub: Stub) -> ReadAsyncStub:
    """``stub`` as the generated stub type SegmentStreams takes: it scripts the one
    method the streams call (``Read``), and the generated class is not a protocol."""
    return cast("ReadAsyncStub", stub)


def response(offset: int, count: int, next_offset: int) -> read_pb2.ReadResponse:
    data = encode_block([b"e%d" % (offset + i) for i in range(count)])
    return read_pb2.ReadResponse(
        blocks=[read_pb2.ReadBlock(offset=offset, event_count=count, data=data)],
        next_offset=next_offset)


def json_response(offset: int, payloads: list[bytes]) -> read_pb2.ReadResponse:
    return read_pb2.ReadResponse(blocks=[read_pb2.ReadBlock(
        offset=offset, event_count=len(payloads), data=encode_block(payloads))],
        next_offset=offset + len(payloads))
