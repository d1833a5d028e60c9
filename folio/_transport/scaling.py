"""What writers and readers need to follow a topic across scaling.

A sealed segment's successors come from the broker (``Admin.GetSuccessors``);
the client gives its writers and readers a coroutine that asks for them, run
on the SDK's IO thread.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from folio.models import SegmentRange

__all__ = ["SuccessorLookup"]

#: Asks the broker for a sealed segment's successors, by ``key_low`` (each with
#: its predecessors); empty when the segment was sealed without any (a sealed topic).
SuccessorLookup = Callable[[str], Awaitable[list[SegmentRange]]]
