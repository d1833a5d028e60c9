"""The transaction buffer's ``SnapshotStore`` on the compacted system topic.

Snapshots of every segment's transaction buffer go to one keyed, compacted
system topic, ``_txnbuffer_snapshots`` (``broker.system.compacted_topic``).
"""

from __future__ import annotations

from collections.abc import Mapping

from broker.system.compacted_topic import CompactedTopic
from broker.topics.manager import TopicManager
from txnbuffer.api import SnapshotStore

__all__ = ["SNAPSHOT_TOPIC", "TopicSnapshotStore", "snapshot_store"]

SNAPSHOT_TOPIC = "_txnbuffer_snapshots"


class TopicSnapshotStore:
    """``txnbuffer.api.SnapshotStore`` on a ``CompactedTopic``."""

    def __init__(self, topic: CompactedTopic) -> None:
        self._topic = topic

    @property
    def topic(self) -> CompactedTopic:
        """The compacted topic the snapshots live in."""
        return self._topic

    @property
    def max_record_bytes(self) -> int:
        """The largest value ``write`` accepts."""
        return self._topic.max_record_bytes

    async def write(self, key: str, value: bytes | None) -> None:
        """Write ``value`` under ``key`` durably; None deletes the key."""
        await self._topic.write(key, value)

    async def read_prefix(self, prefix: str) -> Mapping[str, bytes]:
        """The latest value of every live key starting with ``prefix``."""
        return await self._topic.read_prefix(prefix)


def snapshot_store(topics: TopicManager) -> SnapshotStore:
    """The broker's snapshot store: ``_txnbuffer_snapshots`` on ``topics``."""
    return TopicSnapshotStore(CompactedTopic(topics, SNAPSHOT_TOPIC))
