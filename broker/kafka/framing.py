"""Kafka frames: a big-endian int32 size, then that many bytes (request or response).

A size outside ``[MIN_FRAME_BYTES, max_frame_bytes]`` is a protocol error:
the connection is closed (as Kafka's broker does with
``socket.request.max.bytes``), so one client can make the broker hold at most
``max_frame_bytes`` per connection.
"""

from __future__ import annotations

import asyncio
import struct
from typing import Final

__all__ = ["DEFAULT_MAX_FRAME_BYTES", "MIN_FRAME_BYTES", "FrameError", "frame", "read_frame"]

_SIZE = struct.Struct(">i")
#: The largest request a client may send (Kafka's ``socket.request.max.bytes``
#: is 100 MiB; a Folio block is at most 4 MiB, so 64 MiB leaves room for a
#: Produce of many partitions without letting one connection hold more).
DEFAULT_MAX_FRAME_BYTES: Final = 64 * 1024 * 1024
#: The smallest request: api_key, api_version, correlation_id and a null client id.
MIN_FRAME_BYTES: Final = 10


class FrameError(Exception):
    """A frame that breaks the protocol: the connection must be closed."""


async def read_frame(reader: asyncio.StreamReader, max_frame_bytes: int) -> bytes | None:
    """The next frame's bytes, or None when the client closed the connection cleanly.

    Raises ``FrameError`` for a size out of bounds or a frame cut short.
    """
    try:
        prefix = await reader.readexactly(4)
    except asyncio.IncompleteReadError as error:
        if not error.partial:
            return None
        raise FrameError(f"frame size cut after {len(error.partial)} of 4 bytes") from None
    (size,) = _SIZE.unpack(prefix)
    if not MIN_FRAME_BYTES <= size <= max_frame_bytes:
        raise FrameError(
            f"frame of {size} bytes is outside [{MIN_FRAME_BYTES}, {max_frame_bytes}]")
    try:
        return await reader.readexactly(size)
    except asyncio.IncompleteReadError as error:
        raise FrameError(
            f"frame cut after {len(error.partial)} of its {size} bytes") from None


def frame(payload: bytes) -> bytes:
    """``payload`` with its size in front."""
    return b"".join((_SIZE.pack(len(payload)), payload))
