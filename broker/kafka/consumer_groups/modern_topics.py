"""What a consumer-protocol group subscribes to, looked at again every refresh.

A member subscribes to topic names, a regular expression (``topic_regex``), or
both; its topics are the names and every user topic the regex matches that the
member may see (Kafka's DESCRIBE check; Folio's system topics are never listed).
``refresh`` resolves every member's regex against the topics as they are now
and reads the partition counts of every topic subscribed, so a topic created
or deleted reaches the assignment at the same round (``metadata_refresh_ms``)
as a split's new partitions. ``ModernGroups`` bumps the group epoch when
either changed.

The two reads have the outcomes of any read: a topic missing has 0
partitions; a count or the topic list that cannot be read now keeps what the
group had (the count, the member's regex topics), logged, and the next
round tries again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from broker.errors import BrokerError, TopicNotFoundError
from broker.kafka.consumer_groups.modern_members import ModernGroup
from broker.kafka.consumer_groups.modern_requests import PartitionCount, TopicAllowed, TopicNames
from broker.kafka.consumer_groups.topic_regex import matching
from ledger.errors import LedgerError

__all__ = ["Subscription", "refresh"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Subscription:
    """What one member asks for, and the topics it had (kept if the topics are unreadable)."""

    topic_names: frozenset[str]
    regex: str | None
    topic_allowed: TopicAllowed | None
    had: frozenset[str]


async def refresh(group: ModernGroup, wanted: dict[str, Subscription],
                  partitions: PartitionCount, names: TopicNames | None,
                  ) -> tuple[dict[str, frozenset[str]], dict[str, int]]:
    """(each member's topics, each subscribed topic's partition count) as they are now."""
    topics: list[str] | None = None
    if names is not None and any(s.regex for s in wanted.values()):
        try:
            topics = sorted(await names())
        except (BrokerError, LedgerError) as error:
            log.info("kafka consumer group %s: topics not known now (%s)", group.group_id, error)
    subscribed: dict[str, frozenset[str]] = {}
    for member_id, s in wanted.items():
        if not s.regex:
            subscribed[member_id] = s.topic_names
        elif topics is None:
            subscribed[member_id] = s.had | s.topic_names
        else:
            allowed = s.topic_allowed or (lambda _: True)
            subscribed[member_id] = s.topic_names | frozenset(
                t for t in matching(s.regex, topics) if allowed(t))
    every = sorted(frozenset().union(*subscribed.values()))
    return subscribed, {topic: await _count(group, partitions, topic) for topic in every}


async def _count(group: ModernGroup, partitions: PartitionCount, topic: str) -> int:
    """``topic``'s partitions; 0 if it does not exist; the last count if unreadable now."""
    try:
        return await partitions(topic)
    except TopicNotFoundError:
        return 0
    except (BrokerError, LedgerError) as error:
        log.info("kafka consumer group %s: partitions of %s not known now (%s)",
                 group.group_id, topic, error)
        return group.partition_counts.get(topic, 0)
