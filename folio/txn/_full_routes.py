"""Which open segment of a topic a full transaction's event goes to (both faces).

The routing key's hash picks the segment whose range holds it (as an
``EventWriter`` routes); keyless events rotate over the open segments. A
writer sets new routes after a scale (``set``), from the topic as described then.
"""

from __future__ import annotations

import threading

from folio.api.v1.routing import segment_index
from folio.errors import FolioError
from folio.models import TopicInfo

__all__ = ["TopicRoutes"]

#: Routing keys remembered with their segment, at most (then forgotten, all at once).
_MAX_REMEMBERED_KEYS = 10_000


class TopicRoutes:
    """A topic's open segments by key range. Thread-safe."""

    def __init__(self, topic: TopicInfo) -> None:
        self._lock = threading.Lock()
        self.set(topic)

    def set(self, topic: TopicInfo) -> None:
        """Routes by ``topic``'s open segments from now on.

        Raises:
            FolioError: the topic has no open segment.
        """
        ranges = sorted((s for s in topic.segments if not s.sealed), key=lambda s: s.key_low)
        if not ranges:
            raise FolioError(f"topic {topic.name!r} has no open segment to write to")
        with self._lock:
            self._names = tuple(s.name for s in ranges)
            self._key_highs = [s.key_high for s in ranges]
            self._routes: dict[str, str] = {}
            self._rotation = 0

    @property
    def count(self) -> int:
        """How many open segments events go to."""
        return len(self._names)

    def segment_for(self, routing_key: str | None) -> str:
        """The segment of ``routing_key``; keyless: the next one in rotation."""
        if routing_key is None:
            with self._lock:
                index = self._rotation
                self._rotation = (index + 1) % len(self._names)
            return self._names[index]
        segment = self._routes.get(routing_key)
        if segment is None:
            segment = self._names[segment_index(self._key_highs, routing_key)]
            if len(self._routes) > _MAX_REMEMBERED_KEYS:
                self._routes.clear()
            self._routes[routing_key] = segment
        return segment
