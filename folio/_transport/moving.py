"""Flows that follow their segment to another broker, and how fast they look it up.

**WrongHost.** :meth:`Brokers.follow` moves an append flow: it leaves its
stream; when the answer named the owner it is registered on the owner's
stream at once, else ``LookupSegment`` is asked (any broker, backoff doubling
to 0.5 s) until an owner is known or the flow's deadline passes. The flow then
sets up there as after a reconnect: ``AppendSetup`` tells which unacknowledged
blocks were stored and the others are sent again, so nothing is lost or
doubled. A segment that moves again within a short time waits a backoff
first, so two brokers that each name the other cannot make a tight loop.
Readers call :meth:`Brokers.find_owner` and read on from their offset.
"""

from __future__ import annotations

from typing import Final, Protocol

from folio._transport.append_stream import BACKOFF_MAX_S, AppendFlow, AppendStream
from folio.errors import FolioError

__all__ = ["LOOKUP_ATTEMPT_S", "MOVE_BACKOFF_MAX_S", "QUICK_MOVE_S", "MovingFlow"]

#: Longest wait for one LookupSegment answer.
LOOKUP_ATTEMPT_S: Final = 5.0
#: A segment that moves again within this long waits a backoff before its flow follows.
QUICK_MOVE_S: Final = 2 * BACKOFF_MAX_S
#: Longest wait between lookups of a moving segment's owner (be there soon after a claim).
MOVE_BACKOFF_MAX_S: Final = 0.5


class MovingFlow(AppendFlow, Protocol):
    """An append flow that can follow WrongHost to another broker's stream."""

    def on_moved(self, stream: AppendStream, flow_id: int) -> bool:
        """Registered on the owner's stream; False if the flow no longer wants it."""

    def on_move_failed(self, error: FolioError) -> None:
        """No owner was found before the flow's deadline."""
