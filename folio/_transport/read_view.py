"""Read responses parsed in one pass: the Read call a segment stream opens on a channel.

A ``ReadResponse``'s blocks hold serialized ``EventBlock`` messages as
``bytes``. Parsed as a ``ReadResponse`` and then block by block, every
block's bytes are copied out of the response and parsed a second time. Here
the response is parsed as a ``ReadResponseView`` (``proto/folio/v1/read_view.proto``:
the same wire bytes, its ``ReadBlock.data`` declared as the ``EventBlock`` it
holds), so one parse gives every block's columns (profiled: about half of the
reader's unpacking time per event at 100 B and 1 KiB; docs/bench.md,
"Catch-up consume").

A response that does not parse that way (a damaged block: garbage, a cut
block, bad UTF-8 in a routing key) is parsed as a plain ``ReadResponse``
instead and handed on as that, so that unpacking decodes its blocks one by
one and raises ``InvalidBlockError`` naming the damaged block's offset, as it
always did; the blocks before it are returned. A response that does not parse
even as a ``ReadResponse`` fails the call as before (gRPC's deserialization
error, retried as a status the broker did not give).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from google.protobuf.message import DecodeError

from folio.api.v1 import read_pb2, read_view_pb2

if TYPE_CHECKING:
    from google.protobuf.internal.containers import RepeatedCompositeFieldContainer
    from grpc import aio

    from folio.api.v1.read_pb2_grpc import ReadAsyncStub

__all__ = ["READ_METHOD", "ReadView", "open_read", "parse_read_response"]

#: The Read method's full name (read.proto).
READ_METHOD = "/folio.v1.Read/Read"


class ReadView:
    """A ``ReadResponse`` parsed as a ``ReadResponseView``, and its size on the wire.

    Has the ``ReadResponse`` fields the read streams look at, so either can be
    queued; ``blocks[i].data`` is the block's parsed ``EventBlock``.

    Attributes:
        blocks: the response's blocks (``ReadBlockView``), in offset order.
        end_offset: the segment's end offset when the response was made.
        end_of_segment: the response holds (or held) the segment's last block.
        next_offset: where the stream goes on from (read.proto).
        wire_bytes: the response's serialized size (its blocks and their framing).
    """

    __slots__ = ("blocks", "end_of_segment", "end_offset", "next_offset", "wire_bytes")

    def __init__(self, message: read_view_pb2.ReadResponseView, wire_bytes: int) -> None:
        self.blocks: RepeatedCompositeFieldContainer[read_view_pb2.ReadBlockView] = (
            message.blocks)
        self.end_offset = message.end_offset
        self.end_of_segment = message.end_of_segment
        self.next_offset = message.next_offset
        self.wire_bytes = wire_bytes


def parse_read_response(data: bytes) -> ReadView | read_pb2.ReadResponse:
    """The Read call's response deserializer: a ``ReadView``, or a plain ``ReadResponse``
    when a block does not parse as an ``EventBlock`` (see the module docstring).

    Raises:
        DecodeError: ``data`` is not even a ``ReadResponse`` (gRPC fails the call).
    """
    try:
        return ReadView(read_view_pb2.ReadResponseView.FromString(data), len(data))
    except DecodeError:
        return read_pb2.ReadResponse.FromString(data)


def open_read(stub: ReadAsyncStub, channel: aio.Channel | None, request: read_pb2.ReadRequest,
              ) -> aio.UnaryStreamCall[read_pb2.ReadRequest, ReadView | read_pb2.ReadResponse]:
    """Opens a Read stream: on ``channel`` (the stub's, of the client's pool) with
    responses parsed by ``parse_read_response``; without one, by ``stub`` as given
    (tests give stubs of their own), whose responses are ``ReadResponse``s."""
    if channel is None:
        return cast("aio.UnaryStreamCall[read_pb2.ReadRequest, ReadView | read_pb2.ReadResponse]",
                    stub.Read(request))
    call = channel.unary_stream(
        READ_METHOD, request_serializer=read_pb2.ReadRequest.SerializeToString,
        response_deserializer=parse_read_response)
    return call(request)
