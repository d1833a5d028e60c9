"""What a writer's flow policy tells the engine: the contract of ``FlowEngine``'s plug-ins.

The engine (``folio._flow.engine``) keeps the units a policy submitted in
order, numbers them, sends them, settles them by the broker's answers and
resends them; the policy decides the rest through the callbacks below. Every
callback runs on the engine's event loop, never blocks and never awaits.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar

from folio.api.v1 import append_pb2
from folio.errors import FolioError

__all__ = ["FlowPolicy", "FlowUnit"]


class FlowUnit(Protocol):
    """One thing the broker stores whole: an event block, or a whole transaction.

    The engine numbers a unit on its first send (``last_event_number``, the
    number of its last event) and keeps the number for good: the broker
    de-duplicates by it. ``None`` means not numbered yet.
    """

    event_count: int
    last_event_number: int | None


U_contra = TypeVar("U_contra", bound=FlowUnit, contravariant=True)


class FlowPolicy(Protocol[U_contra]):
    """The part of a flow that differs between writers (see ``folio._flow``)."""

    def sequence(self, queue: Sequence[U_contra], outstanding: int) -> int:
        """How many units of ``queue[outstanding:]`` go out now as one sequence; 0: none yet.

        ``queue`` is every unit not settled, in order; the first
        ``outstanding`` were sent on this setup and are not answered yet:
        the policy's window (back-pressure) is decided here. A sequence is
        sent as the blocks ``frame`` gives, the last with ``end``; the broker
        writes it as one entry and answers its end block alone. Called only
        while some unit is unsent.
        """

    def frame(self, group: Sequence[U_contra]) -> list[tuple[bytes, int]]:
        """The ``(data, event count)`` blocks of a sequence, in order."""

    def appended(self, group: Sequence[U_contra], appended: append_pb2.DataAppended) -> None:
        """The sequence ``group`` was written (the engine removed it from its queue)."""

    def settled(self, unit: U_contra) -> None:
        """``AppendSetup`` showed ``unit`` was written (its answer was lost): offset unknown."""

    def refused(self, group: Sequence[U_contra] | None, error: FolioError) -> bool:
        """The broker refused the setup (``group`` None) or the end block of ``group``.

        WrongHost was handled already. True: the policy handled it (failed a
        unit, ended the flow, ...). False: the engine sets up again after a
        backoff when ``error`` is retriable, and ignores it otherwise.
        """

    def abandon(self, units: Sequence[U_contra], error: FolioError) -> None:
        """The flow ended for good (``FlowEngine.die``): fail ``units`` because of ``error``."""

    def tick(self, now: float) -> None:
        """Periodic (``time.monotonic()``): give up on units past their deadline."""

    def follow_deadline(self) -> float | None:
        """Until when (``time.monotonic()``) a moved flow looks its owner up; None: for ever."""

    def move_failed(self, error: FolioError) -> None:
        """No owner of the segment was found before ``follow_deadline``."""

    def sealed(self) -> None:
        """The setup asked by ``FlowEngine.learn_sealed`` was answered (state SEALED)."""
