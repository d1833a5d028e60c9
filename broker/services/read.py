"""The ``folio.v1.Read`` servicer: a segment's blocks from an offset, then a long poll at the tail.

Following the segment (reads, tail waits, heartbeats) is
``broker.segments.tailing.follow``; here the request is decoded and each step
encoded. Per read of the segment (about ``max_bytes`` of whole blocks, as
stored, but always whole entries: a transaction's entry may hold 16 MiB) one
message, or several of at most ``max_bytes`` each when it is larger (a block
is never split; ``max_bytes`` is capped so that every response fits gRPC's
default 4 MiB receive limit); no event is unpacked, and a response with blocks
goes out as its wire encoding (``broker.services.read_wire``: the blocks'
bytes copied once). At the tail an empty
response goes out after ``max_wait_ms`` without data, so clients see the
stream is alive.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import grpc

from broker.api import Isolation, ReadBlock, Topics
from broker.errors import BrokerError, InvalidArgumentError
from broker.metrics import observe_read
from broker.segments.block_limits import MAX_BLOCK_BYTES
from broker.segments.tailing import follow
from broker.services._servicer import abort_with
from broker.services.read_wire import encode_response
from folio.api.v1 import read_pb2, read_pb2_grpc
from ledger.errors import LedgerError

__all__ = ["DEFAULT_MAX_BYTES", "DEFAULT_MAX_WAIT_MS", "ReadServicer"]

_Context = grpc.aio.ServicerContext[Any, Any]

#: ``max_bytes`` when a request leaves it 0.
DEFAULT_MAX_BYTES = 1024 * 1024
#: Largest ``max_bytes`` honoured: with its framing, a response stays within
#: gRPC's default 4 MiB receive limit (a block alone is at most
#: ``block_limits.MAX_BLOCK_BYTES``, which fits too), so readers need not raise it.
MAX_MAX_BYTES = MAX_BLOCK_BYTES
#: A ``ReadBlock``'s own fields around its data (offset, event_count, tags, lengths), at most.
_BLOCK_FRAMING_BYTES = 32
#: ``max_wait_ms`` when a request leaves it 0.
DEFAULT_MAX_WAIT_MS = 500
#: Longest ``max_wait_ms`` honoured.
MAX_MAX_WAIT_MS = 60_000


class ReadServicer(read_pb2_grpc.ReadServicer):
    """Streams segments' blocks to readers.

    Args:
        topics: the broker's topics.
        stopping: set when the broker shuts down; streams then end UNAVAILABLE.
    """

    def __init__(self, topics: Topics, stopping: asyncio.Event) -> None:
        self._topics = topics
        self._stopping = stopping

    # Responses with blocks are yielded encoded (bytes, sent as they are by the
    # serializer broker.services._handlers registers), hence the override.
    async def Read(  # type: ignore[override]
        self, request: read_pb2.ReadRequest, context: _Context
    ) -> AsyncIterator[read_pb2.ReadResponse | bytes]:
        max_bytes = min(request.max_bytes or DEFAULT_MAX_BYTES, MAX_MAX_BYTES)
        max_wait_s = min(request.max_wait_ms or DEFAULT_MAX_WAIT_MS, MAX_MAX_WAIT_MS) / 1000
        offset = request.offset
        try:
            if offset < 0:
                raise InvalidArgumentError(f"offset must be >= 0, got {offset}")
            isolation = _isolation(request.isolation)
            segment = await self._topics.segment(request.segment)
            async for step in follow(segment, offset, max_bytes, isolation, max_wait_s,
                                     self._stopping):
                if not step.blocks:
                    yield read_pb2.ReadResponse(end_offset=step.end_offset,
                                                end_of_segment=step.end_of_segment,
                                                next_offset=step.next_offset)
                    continue
                parts = _split(step.blocks, max_bytes, request.segment)
                for number, blocks in enumerate(parts, 1):
                    if number == len(parts):
                        yield encode_response(blocks, step.end_offset, step.end_of_segment,
                                              step.next_offset)
                    else:
                        # Only the step's last response may claim what the step
                        # left out after its blocks; an earlier one claims up to
                        # its own last block (read.proto: every offset before
                        # next_offset was served or left out).
                        last = blocks[-1]
                        yield encode_response(blocks, step.end_offset, False,
                                              last.offset + last.event_count)
        except (BrokerError, LedgerError) as error:
            await abort_with(context, error)


def _isolation(value: int) -> Isolation:
    """The request's isolation; ``InvalidArgumentError`` for an unknown value."""
    try:
        return Isolation(value)
    except ValueError:
        raise InvalidArgumentError(f"unknown isolation {value}") from None


def _split(blocks: list[ReadBlock], max_bytes: int, segment: str) -> list[list[ReadBlock]]:
    """The blocks of each response, of at most ``max_bytes`` each, framing included.

    A response holds at least one block: a block larger than ``max_bytes``
    goes alone (never split).
    """
    responses: list[list[ReadBlock]] = [[]]
    size = 0
    total = events = 0
    for block in blocks:
        if size and size + len(block.data) + _BLOCK_FRAMING_BYTES > max_bytes:
            responses.append([])
            size = 0
        responses[-1].append(block)
        size += len(block.data) + _BLOCK_FRAMING_BYTES
        total += len(block.data)
        events += block.event_count
    observe_read(segment, events, total)
    return responses
