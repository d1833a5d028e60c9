"""What a reader group member's ``read_next`` returns: an event or a checkpoint event."""

from __future__ import annotations

from typing import Generic, TypeVar

from folio.models import Event
from folio.read.cuts import Position

__all__ = ["EventRead"]

T = TypeVar("T")


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
