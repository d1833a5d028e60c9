"""What a reader group member's ``read_next`` returns: an event or a checkpoint event;
and the bound of a reader's ``read_many`` (the event reader's and a member's)."""

from __future__ import annotations

from collections.abc import Iterable
from itertools import repeat
from typing import Final, Generic, TypeVar

from folio.errors import InvalidArgumentError
from folio.models import Event
from folio.read.cuts import Position

__all__ = ["DEFAULT_MAX_EVENTS", "EventRead", "check_max_events", "listed_reads"]

T = TypeVar("T")

#: The most events ``read_many`` returns unless told (Kafka's ``max.poll.records``).
DEFAULT_MAX_EVENTS: Final = 500


def check_max_events(max_events: object) -> None:
    """``InvalidArgumentError`` unless ``max_events`` is a positive int."""
    if isinstance(max_events, bool) or not isinstance(max_events, int) or max_events < 1:
        raise InvalidArgumentError(f"max_events must be a positive int, not {max_events!r}")


class EventRead(Generic[T]):
    """What ``GroupReader.read_next`` returns: an event, or a checkpoint event.

    Attributes:
        event: the event, or None for a checkpoint event.
        checkpoint_name: the checkpoint's name for a checkpoint event, else None.
    """

    __slots__ = ("_positions", "_reader", "checkpoint_name", "event")

    def __init__(self, event: Event[T] | None, reader: str, positions: dict[str, int],
                 checkpoint_name: str | None = None) -> None:
        self.event = event
        self.checkpoint_name = checkpoint_name
        self._reader = reader
        self._positions = positions

    @property
    def is_checkpoint(self) -> bool:
        """Whether this is a checkpoint event (no ``event``)."""
        return self.checkpoint_name is not None

    @property
    def position(self) -> Position:
        """The reader's position just after this event (every segment it holds)."""
        return Position(self._reader, self._positions)

    def __repr__(self) -> str:
        if self.checkpoint_name is not None:
            return f"EventRead(checkpoint={self.checkpoint_name!r})"
        return f"EventRead({self.event!r})"


class _ListedRead(EventRead[T]):
    """An event of a member's ``read_many`` list after its first: the positions are the
    first one's but for the event's own segment, made only if asked for."""

    __slots__ = ()

    @property
    def position(self) -> Position:
        event = self.event
        assert event is not None  # a list's reads after the first are events
        return Position(self._reader, {**self._positions, event.segment: event.offset + 1})


def listed_reads(events: Iterable[Event[T]], reader: str, positions: dict[str, int],
                 ) -> list[EventRead[T]]:
    """``EventRead``s of ``events``, which follow, in one segment, the event ``positions``
    (the reader's after it, every segment) were taken after."""
    return list(map(_ListedRead, events, repeat(reader), repeat(positions)))
