"""The topics a consumer group member subscribes to, read from its JoinGroup metadata.

A ``consumer`` protocol member's metadata is Kafka's ConsumerProtocolSubscription:
an int16 version, then (in every version, 0-3) the topics as an int32 count of
int16-length UTF-8 strings; what follows (user data, owned partitions, ...) is
not needed here. OffsetDelete refuses the partitions of these topics
(GROUP_SUBSCRIBED_TO_TOPIC), as Kafka's coordinator does.
"""

from __future__ import annotations

import struct

__all__ = ["UNREADABLE", "subscribed_topics"]

#: What an unreadable subscription subscribes to: treated as every topic
#: (a member whose metadata cannot be read might use any offsets).
UNREADABLE = frozenset({"*"})


def subscribed_topics(metadata: bytes) -> set[str]:
    """The topic names of a subscription; ``{"*"}`` (``UNREADABLE``) if it cannot be read."""
    try:
        (count,) = struct.unpack_from(">i", metadata, 2)
        offset = 6
        topics = set()
        for _ in range(count):
            (size,) = struct.unpack_from(">h", metadata, offset)
            offset += 2
            if size < 0 or offset + size > len(metadata):
                return set(UNREADABLE)
            topics.add(metadata[offset:offset + size].decode("utf-8"))
            offset += size
        return topics
    except (struct.error, UnicodeDecodeError):
        return set(UNREADABLE)
