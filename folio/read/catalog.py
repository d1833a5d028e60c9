"""What readers need to know of a topic's segments: the ``SegmentCatalog`` Protocol.

Batch reads and reader groups look up segments (the graph across scaling, a
segment's offsets, a sealed segment's successors) through these three admin
calls. ``folio.Client`` provides them; naming the Protocol here instead of
the client keeps ``read`` below ``client`` (no import circle), and lets a
test hand in any object that answers them.
"""

from __future__ import annotations

from typing import Protocol

from folio.models import SegmentInfo, SegmentRange

__all__ = ["SegmentCatalog"]


class SegmentCatalog(Protocol):
    """The admin calls about segments; blocking, each raising the broker's typed error."""

    def get_segments(self, topic: str, *, include_sealed: bool = False) -> list[SegmentRange]:
        """The topic's active segments by ``key_low`` (every segment ever, with ``include_sealed``).

        Raises ``TopicNotFoundError`` for an unknown topic.
        """
        ...

    def get_segment_info(self, segment: str) -> SegmentInfo:
        """One segment's offsets, state and ledgers; ``NoSuchSegmentError``."""
        ...

    def get_successors(self, segment: str) -> list[SegmentRange]:
        """The segments that replaced a sealed ``segment``, by ``key_low``; empty while open."""
        ...
