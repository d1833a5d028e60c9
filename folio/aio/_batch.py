"""Batch reads for asyncio code: the blocking face's ``BatchClient``, on the caller's loop.

``await client.batch_client()`` gives an :class:`AsyncBatchClient`: ``await
segments(topic, from_cut, to_cut)`` lists the same ``SegmentSlice`` values
as ``BatchClient.segments`` (``folio.read.batch.plan_slices``, one plan for
both faces), and ``await read_segment(slice)`` an
:class:`AsyncSegmentEvents` to read with ``async for`` (or ``await read()``).
Each range is a ``folio.read.batch.SegmentEvents`` made on the loop's IO
(``open_range``); this face takes from it with ``take(0)``, which never
waits, and awaits its stream's signal when nothing is there.

Cancellation: an event is taken off the range only by the ``take(0)`` that
returns it, with no ``await`` between that and ``read`` returning, so a
cancelled ``read`` loses nothing (``position`` stays on the next event).
"""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import TYPE_CHECKING, Any

from folio._transport.loop_io import LoopIo, as_io_thread
from folio.errors import DeserializationError
from folio.models import DeserializationPolicy, Event
from folio.read.batch import (
    SegmentEvents,
    SegmentSlice,
    check_read_options,
    open_range,
    plan_slices,
)
from folio.read.cuts import StreamCut
from folio.serializers import Serializer

if TYPE_CHECKING:
    from folio._transport.pool import ReadChannels
    from folio.admin import AdminCore

__all__ = ["AsyncBatchClient", "AsyncSegmentEvents"]


class AsyncBatchClient:
    """Lists segments between cuts and reads them from coroutines (``BatchClient``'s calls).

    Made by ``AsyncClient.batch_client``; used from the client's loop only.
    """

    def __init__(self, admin: AdminCore, io: LoopIo, channels: ReadChannels) -> None:
        self._admin = admin
        self._io = io
        self._channels = channels

    async def segments(self, topic: str, from_cut: StreamCut | None = None,
                       to_cut: StreamCut | None = None) -> list[SegmentSlice]:
        """The topic's segments to read (as ``BatchClient.segments``, which documents it)."""
        every = await self._admin.get_segments(topic, include_sealed=True)
        return plan_slices(topic, every, from_cut, to_cut)

    async def read_segment(self, segment: SegmentSlice | str, start: int | None = None,
                           end: int | None = None, serializer: Serializer[Any] | None = None,
                           *, isolation: str = "read_committed",
                           on_deserialization_error: DeserializationPolicy = "raise",
                           ) -> AsyncSegmentEvents:
        """The events of one segment from ``start`` up to ``end`` (as
        ``BatchClient.read_segment``, which documents the arguments and errors)."""
        if isinstance(segment, SegmentSlice):
            name, first, stop = segment.name, segment.start_offset, segment.end_offset
        else:
            check_read_options(isolation, on_deserialization_error)
            info = (await self._admin.get_segment_info(segment)).segment
            name, first, stop = segment, info.start_offset, info.end_offset
        return AsyncSegmentEvents(open_range(
            as_io_thread(self._io), self._channels, name, first if start is None else start,
            stop if end is None else end, serializer, isolation, on_deserialization_error))


class AsyncSegmentEvents:
    """The events of one segment range, read from coroutines: ``async for event in events``.

    As ``SegmentEvents``: offset order; a ``DeserializationError`` leaves it on
    the event until ``skip``; ``close`` (or ``async with``) stops the stream.
    """

    def __init__(self, core: SegmentEvents) -> None:
        self._core = core
        self._arrived = asyncio.Event()
        self._items = core.on_item(self._arrived.set)

    @property
    def position(self) -> int:
        """The offset of the next event to return."""
        return self._core.position

    async def read(self) -> Event[Any] | None:
        """The next event, waiting as long as it takes; None once the range is read.

        Raises:
            As ``SegmentEvents``' ``next``.
        """
        core = self._core
        while True:
            try:
                event = core.take(0)
            except StopIteration:
                return None
            if event is not None:
                return event
            if self._items.empty():  # (an end or a wake-up may stop a take early)
                self._arrived.clear()
                await self._arrived.wait()

    def skip(self, error: DeserializationError) -> None:
        """Steps over the undecodable event ``error`` names (as ``SegmentEvents.skip``)."""
        self._core.skip(error)

    def close(self) -> None:
        """Stops the stream; ``read`` then returns None. Idempotent."""
        self._core.close()
        self._arrived.set()

    def __aiter__(self) -> AsyncSegmentEvents:
        return self

    async def __anext__(self) -> Event[Any]:
        event = await self.read()
        if event is None:
            raise StopAsyncIteration
        return event

    async def __aenter__(self) -> AsyncSegmentEvents:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, traceback: TracebackType | None) -> None:
        self.close()
