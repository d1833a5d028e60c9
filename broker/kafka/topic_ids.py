"""Topic ids to names for Fetch v13+ (which names topics by id), one map per listener.

A topic's id is stored in its record (``broker.topics.records``), so every
broker and restart agree on it. Metadata reads it with each topic it answers
and notes it here (``note``), which is where clients learn ids: a Fetch by
an id seen in this listener's Metadata costs no read. An id not known is
looked up by listing the topics again, at most once per ``refresh_s`` (a
client asking for ids that do not exist cannot make the broker list every
topic each request); still unknown, it is answered UNKNOWN_TOPIC_ID, and the
client refreshes its metadata and asks again.

A topic deleted and made again under its name gets a new id: Metadata's
``note`` drops the old id's entry, so a Fetch by the old id is then
UNKNOWN_TOPIC_ID. Until some Metadata here answers the new topic, a Fetch
by the old id reads the new topic's partitions (the window this map has).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

from broker.api import Topics
from broker.errors import TopicNotFoundError

__all__ = ["TopicIds"]


class TopicIds:
    """Topic id -> name, from Metadata's answers and, for an unknown id, the topic list."""

    def __init__(self, refresh_s: float = 1.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._names: dict[uuid.UUID, str] = {}
        self._ids: dict[str, uuid.UUID] = {}
        self._refresh_s = refresh_s
        self._clock = clock
        self._refreshed = float("-inf")

    def note(self, name: str, topic_id: uuid.UUID) -> None:
        """``name`` has ``topic_id`` now (an older id of the name is forgotten)."""
        old = self._ids.get(name)
        if old is not None and old != topic_id:
            self._names.pop(old, None)
        self._ids[name] = topic_id
        self._names[topic_id] = name

    async def name_of(self, topics: Topics, topic_id: uuid.UUID) -> str | None:
        """The name of the topic of ``topic_id``; None if no topic has it.

        Raises what ``list_topics`` raises (a retriable ``LedgerError``:
        the store cannot be read now).
        """
        name = self._names.get(topic_id)
        if name is not None:
            return name
        now = self._clock()
        if now - self._refreshed < self._refresh_s:
            return None
        self._refreshed = now
        for info in await topics.list_topics():
            if info.topic_id:
                self.note(info.name, uuid.UUID(info.topic_id))
        return self._names.get(topic_id)

    async def resolve(self, topics: Topics, topic_id: uuid.UUID) -> str | None:
        """The name of the topic whose record holds ``topic_id`` now; None if none does.

        For a change by id (DeleteTopics v6): read from the store, never this
        map alone (it may still hold a deleted topic's id): the name noted
        for the id is checked against its record, else the topic list is
        read (not limited to once per ``refresh_s``: a change is rarer than a
        Fetch). Raises what ``topic_id`` and ``list_topics`` raise.
        """
        name = self._names.get(topic_id)
        if name is not None:
            try:
                if uuid.UUID(await topics.topic_id(name)) == topic_id:
                    return name
            except TopicNotFoundError:
                pass
            self._names.pop(topic_id, None)  # that topic is gone, or has a new id
        for info in await topics.list_topics():
            if info.topic_id and uuid.UUID(info.topic_id) == topic_id:
                self.note(info.name, topic_id)
                return info.name
        return None
