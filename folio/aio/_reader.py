"""The asyncio event reader: the blocking face's reader, run on the caller's loop.

An :class:`AsyncEventReader` holds an ``EventReader`` (``folio.read.reader``)
made with the caller's loop as its IO: the same Read streams with credit,
reconnects, WrongHost moves, scaling (successors started once their
predecessors are read) and deserialization policy. Its streams' queue signals
an ``asyncio.Event`` on every response (``EventReader.on_item``); ``read``
takes with ``read_next(0)`` (``read_many``: ``read_many(n, 0)``), which
never waits, and awaits the signal when nothing is there.

Cancellation: an event is taken off the reader only by the ``read_next(0)``
(or ``read_many``) that returns it, with no ``await`` between that and the call returning, so
cancelling a pending ``read`` (or leaving ``async for``) loses nothing: the
next ``read`` returns the event after the last one returned.
"""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import Generic, TypeVar

from folio.errors import DeserializationError
from folio.models import Event
from folio.read._event_read import DEFAULT_MAX_EVENTS
from folio.read.reader import EventReader

__all__ = ["AsyncEventReader"]

T = TypeVar("T")


class AsyncEventReader(Generic[T]):
    """Reads a topic's segments from coroutines; made by ``AsyncClient.reader``.

    Events of one segment come in offset order; segments interleave. Use
    from the client's loop only. An async context manager and an async
    iterator (``async for event in reader``), which ends when the reader is closed.
    """

    def __init__(self, core: EventReader[T]) -> None:
        """Made by ``AsyncClient.reader``."""
        self._core = core
        self._arrived = asyncio.Event()
        self._items = core.on_item(self._arrived.set)

    @property
    def topic(self) -> str:
        """The topic read."""
        return self._core.topic

    @property
    def positions(self) -> dict[str, int]:
        """The offset of the next event to return, per segment (as ``EventReader.positions``)."""
        return self._core.positions

    @property
    def closed(self) -> bool:
        """Whether ``close`` was called."""
        return self._core.closed

    async def read(self) -> Event[T] | None:
        """The next event, waiting as long as it takes (bound it with ``asyncio.timeout``:
        cancelling a pending read loses nothing).

        Returns:
            The event, or None once the reader is closed (and every event
            unpacked before was returned).

        Raises:
            As ``EventReader.read_next``: ``OffsetOutOfRangeError``,
            ``NoSuchSegmentError``, ``DeserializationError`` (the reader stays
            on the event until ``skip``), ``FolioError``.
        """
        core = self._core
        event = core.read_next(0)
        while event is None and not core.closed:
            if self._items.empty():  # (an end or a wake-up may stop a take early)
                self._arrived.clear()
                await self._arrived.wait()
            event = core.read_next(0)
        return event

    async def read_many(self, max_events: int = DEFAULT_MAX_EVENTS) -> list[Event[T]]:
        """The next events, up to ``max_events``, waiting as long as it takes for the first
        (``EventReader.read_many``'s: then those already there, never waiting for more;
        bound the wait with ``asyncio.timeout``: cancelling a pending call loses nothing).

        Returns:
            The events, in ``read``'s order; empty once the reader is closed
            (and every event unpacked before was returned).

        Raises:
            InvalidArgumentError: ``max_events`` is not a positive int.
            As ``read``; a failure met once the list holds events is raised
            by the next call.
        """
        core = self._core
        events = core.read_many(max_events, 0)
        while not events and not core.closed:
            if self._items.empty():  # (an end or a wake-up may stop a take early)
                self._arrived.clear()
                await self._arrived.wait()
            events = core.read_many(max_events, 0)
        return events

    def skip(self, error: DeserializationError) -> None:
        """Steps over the undecodable event ``error`` names (as ``EventReader.skip``)."""
        self._core.skip(error)

    def __aiter__(self) -> AsyncEventReader[T]:
        return self

    async def __anext__(self) -> Event[T]:
        event = await self.read()
        if event is None:
            raise StopAsyncIteration
        return event

    def close(self) -> None:
        """Stops every stream (their tasks are cancelled on the loop); idempotent.

        A pending ``read`` returns None, and ``async for`` ends.
        """
        self._core.close()
        self._arrived.set()

    async def __aenter__(self) -> AsyncEventReader[T]:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, traceback: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<AsyncEventReader topic={self.topic!r} segments={sorted(self.positions)}>"
