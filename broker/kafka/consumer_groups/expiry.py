"""Committed offsets that expire (``offsets.retention.minutes``) or whose topic was deleted.

Kafka's rules (KIP-211; the group coordinator's ``offsetExpirationCondition``),
for the groups this broker coordinates:

- a classic group with a protocol type that is **Empty**: an offset expires
  ``retention`` after the group became Empty (``Group.empty_since_ms``,
  recorded with the group, so a restart does not restart the clock), or
  after its commit when that time is not known;
- a classic ``consumer`` group that is **Stable**: the offsets of topics no
  member subscribes to expire ``retention`` after their commit; the others
  never (a member whose subscription cannot be read subscribes to all);
- a group that never had members (offsets committed by a client that assigns
  partitions itself: no protocol type): each offset ``retention`` after its
  commit;
- a KIP-848 consumer group: as Kafka's ``ConsumerGroup``: ``retention``
  after the commit, except the topics a member subscribes to;
- never while the group rebalances, nor a partition with transactional
  offsets pending (TxnOffsetCommit) or a commit of it being written.

``OffsetCommit`` v1's ``commit_timestamp`` and v2-v4's ``retention_time_ms``
are ignored (Kafka 2.1+ ignores a per-commit retention too): the broker's
setting applies to every commit.

A sweep (``run``: every ``offsets_retention_check_interval_ms``) also removes
the offsets of topics that are gone or were made again since the commit
(commit time before the topic's creation: a topic deleted and created anew
on another broker of a cluster); a deletion on this broker removes them at
once (``remove_topic``, a ``TopicManager`` deletion hook). Removal writes
tombstones (``OffsetStore.expire``), so a restart or the group's next
coordinator does not bring the offsets back. Then an Empty group with no
offsets left is deleted as DeleteGroups deletes it (its record tombstoned:
ListGroups no longer shows it, Kafka's group becomes Dead).

Outcomes: a tombstone write that fails or whose outcome is unknown leaves the
offsets in memory; the next sweep tries again (a tombstone written twice is
harmless). A crash after some tombstones landed: the rest are expired again
after the restart, by the same times. ``WrongHostError`` (the group's
container moved): its new coordinator expires them.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable

from broker.api import Topics
from broker.errors import (
    BrokerError,
    ReaderGroupNotEmptyError,
    ReaderGroupNotFoundError,
    TopicNotFoundError,
)
from broker.kafka.consumer_groups.coordinator import GroupCoordinator
from broker.kafka.consumer_groups.members import Group
from broker.kafka.consumer_groups.modern import ModernGroups
from broker.kafka.consumer_groups.offsets import CommittedOffset, TopicPartition
from broker.kafka.consumer_groups.states import ConsumerGroupState
from broker.kafka.consumer_groups.subscriptions import UNREADABLE, subscribed_topics
from ledger.errors import LedgerError

__all__ = ["OffsetExpiry"]

log = logging.getLogger(__name__)

_S = ConsumerGroupState
#: Offsets looked at between two yields to the event loop (a few ms of work).
_OFFSETS_PER_SLICE = 1024
#: The rule of one group: (partition, offset) -> the time its retention counts from,
#: None: it does not expire now.
_Base = Callable[[TopicPartition, CommittedOffset], int | None]


class OffsetExpiry:
    """Expires the committed offsets of the groups coordinated here (module docstring).

    Args:
        groups: the classic groups and every group's offsets.
        consumers: the KIP-848 groups (None: none served).
        topics: the broker's topics (which exist, and since when).
        clock_ms: wall-clock time in ms.
    """

    def __init__(self, groups: GroupCoordinator, consumers: ModernGroups | None,
                 topics: Topics, clock_ms: Callable[[], int] | None = None) -> None:
        self._groups = groups
        self._consumers = consumers
        self._topics = topics
        self._clock_ms = clock_ms or (lambda: int(time.time() * 1000))
        self._retention_ms = groups.config.offsets_retention_ms
        self._interval_s = groups.config.offsets_retention_check_interval_ms / 1000

    async def run(self) -> None:
        """Sweep every check interval, until cancelled."""
        while True:
            await asyncio.sleep(self._interval_s)
            try:
                await self.sweep()
            except (BrokerError, LedgerError) as error:
                log.warning("kafka groups: offset expiry sweep failed: %s", error)
            except Exception:  # a bug: logged, and the next sweep runs all the same
                log.exception("kafka groups: offset expiry sweep failed")

    async def sweep(self) -> int:
        """Remove every offset expired or of a topic gone, then the groups left with none.

        Returns how many offsets were removed.
        """
        now_ms = self._clock_ms()
        store = self._groups.store
        gone = await self._gone_topics(
            {(tp[0]) for g in store.group_ids() for tp in store.offsets(g)})
        removed = looked = 0
        for group_id in sorted(store.group_ids()):
            if looked >= _OFFSETS_PER_SLICE:
                # Let the loop serve between slices: a sweep that removes nothing
                # never awaits otherwise (about 3.6 us per offset looked at).
                looked = 0
                await asyncio.sleep(0)
            base = self._base(group_id)
            offsets = store.offsets(group_id)
            looked += len(offsets)
            of_gone = {tp: value for tp, value in offsets.items()
                       if _gone(gone, tp[0], value)}
            expired = {tp: value for tp, value in offsets.items() if tp not in of_gone
                       and base is not None
                       and _expired(base(tp, value), now_ms, self._retention_ms)}
            removed += await self._remove(group_id, of_gone, "of a deleted topic")
            removed += await self._remove(group_id, expired, "expired")
        await self._delete_empty_groups()
        return removed

    async def remove_topic(self, topic: str) -> None:
        """Remove every group's offsets of ``topic`` (just deleted here), then empty groups."""
        store = self._groups.store
        for group_id in sorted(store.group_ids()):
            doomed = {tp: value for tp, value in store.offsets(group_id).items()
                      if tp[0] == topic}
            await self._remove(group_id, doomed, f"of deleted topic {topic}")
        await self._delete_empty_groups()

    async def _remove(self, group_id: str, doomed: dict[TopicPartition, CommittedOffset],
                      why: str) -> int:
        pending = self._groups.pending_txn_offsets(group_id)
        doomed = {tp: value for tp, value in doomed.items() if tp not in pending}
        if not doomed:
            return 0
        try:
            removed = await self._groups.store.expire(group_id, doomed)
        except (BrokerError, LedgerError) as error:
            log.warning("kafka group %s: removing %d offsets (%s) failed: %s; tried again "
                        "at the next sweep", group_id, len(doomed), why, error)
            return 0
        if removed:
            log.info("kafka group %s: %d offsets removed (%s)", group_id, len(removed), why)
        return len(removed)

    def _base(self, group_id: str) -> _Base | None:
        """The group's rule now (module docstring); None: nothing of it expires now."""
        if self._consumers is not None:
            modern = self._consumers.group(group_id)
            if modern is not None:
                subscribed: set[str] = set()
                for member in modern.members.values():
                    subscribed |= member.subscribed | member.topic_names
                    if member.regex is not None and not member.subscribed:
                        return None  # its topics are not resolved yet: keep everything
                return _unsubscribed(subscribed)
        group = self._groups.group(group_id)
        if group is None or not group.protocol_type:
            return _by_commit  # only offsets, never members: each by its commit
        if group.state is _S.EMPTY and not group.pending:
            since = group.empty_since_ms
            return _by_commit if since is None else (lambda _tp, _value: since)
        if group.state is _S.STABLE and group.protocol_type == "consumer":
            return _unsubscribed(_subscriptions(group))
        return None

    async def _gone_topics(self, names: Iterable[str]) -> dict[str, int]:
        """Topics named by offsets: -1 for one that is gone, its creation time (ms) otherwise."""
        found: dict[str, int] = {}
        for name in names:
            try:
                found[name] = (await self._topics.get_topic(name)).created_ms
            except TopicNotFoundError:
                found[name] = -1
            except (BrokerError, LedgerError) as error:  # unknown: keep its offsets for now
                log.info("kafka groups: topic %s not looked up (%s)", name, error)
        return found

    async def _delete_empty_groups(self) -> None:
        """Delete the Empty groups with no offsets left (Kafka's group becomes Dead)."""
        store = self._groups.store
        for group_id in sorted(self._groups.groups()):
            group = self._groups.group(group_id)
            # (A group made by a commit being written has no offsets yet: kept.)
            if (group is None or group.state is not _S.EMPTY or not group.is_empty
                    or store.offsets(group_id) or store.committing(group_id)
                    or self._modern(group_id)):
                continue
            try:
                await self._groups.delete_empty(group_id)
            except (BrokerError, LedgerError) as error:
                log.warning("kafka group %s: deleting it (no offsets left) failed: %s",
                            group_id, error)
        if self._consumers is None:
            return
        for modern in self._consumers.groups():
            if (modern.members or store.offsets(modern.group_id)
                    or store.committing(modern.group_id)):
                continue
            try:
                await self._consumers.delete_empty(modern.group_id)
            except (ReaderGroupNotEmptyError, ReaderGroupNotFoundError):
                continue  # a member came meanwhile, or it went
            except (BrokerError, LedgerError) as error:
                log.warning("kafka consumer group %s: deleting it (no offsets left) failed: "
                            "%s", modern.group_id, error)

    def _modern(self, group_id: str) -> bool:
        return self._consumers is not None and self._consumers.group(group_id) is not None


def _by_commit(_tp: TopicPartition, value: CommittedOffset) -> int | None:
    return value.commit_time_ms


def _unsubscribed(subscribed: set[str]) -> _Base | None:
    if subscribed & UNREADABLE:
        return None

    def base(tp: TopicPartition, value: CommittedOffset) -> int | None:
        return None if tp[0] in subscribed else value.commit_time_ms
    return base


def _subscriptions(group: Group) -> set[str]:
    """Every topic a member of a classic ``consumer`` group subscribes to."""
    topics: set[str] = set()
    for member in group.members.values():
        for _, metadata in member.protocols:
            topics |= subscribed_topics(metadata)
    return topics


def _expired(base_ms: int | None, now_ms: int, retention_ms: int) -> bool:
    return base_ms is not None and now_ms - base_ms >= retention_ms


def _gone(gone: dict[str, int], topic: str, value: CommittedOffset) -> bool:
    """Whether the offset's topic is deleted, or was made again after the commit."""
    created_ms = gone.get(topic)
    if created_ms is None:
        return False
    return created_ms < 0 or 0 < value.commit_time_ms < created_ms
