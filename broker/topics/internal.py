"""The rule that keeps system topics the broker's own: public calls never write them.

A system topic (``broker.segments.names.is_system_topic``: ``_txnlog``,
``_txncommitkeys``, ``_txnbuffer_snapshots`` ...) is the broker's state. Only the broker's own
components write it, through ``TopicManager.segment`` and the
``CompactedTopic`` on it; every public call that would append to, truncate,
reconfigure, scale, seal, delete or create one goes through the checks here
first and is answered PERMISSION_DENIED (``InternalTopicError``). Reads
(GetTopic, GetSegments, GetSegmentInfo, Read, reader groups) stay allowed,
for diagnosis.
"""

from __future__ import annotations

from broker.errors import InternalTopicError
from broker.segments.names import is_system_topic

__all__ = ["refuse_internal_segment", "refuse_internal_topic"]


def refuse_internal_topic(topic: str, action: str) -> None:
    """Raise ``InternalTopicError`` if ``topic`` is a system topic; ``action`` names the call."""
    if is_system_topic(topic):
        raise InternalTopicError(topic, action)


def refuse_internal_segment(segment: str, action: str) -> None:
    """Raise ``InternalTopicError`` if ``segment`` (``"<topic>/<number>"``) is a system topic's."""
    topic = segment.rpartition("/")[0] or segment
    refuse_internal_topic(topic, action)
