"""Offset commits, fetches and deletions of classic groups (OffsetCommit, Fetch, Delete).

OffsetCommit follows Kafka's rules: a commit with generation -1 and no
member id (a consumer that assigns partitions itself) is taken while the
group has no members; otherwise the member must be known (UNKNOWN_MEMBER_ID)
and of the current generation (ILLEGAL_GENERATION), and no commit is taken
while the group completes a rebalance (REBALANCE_IN_PROGRESS). Each
partition is checked (an unknown topic or partition:
UNKNOWN_TOPIC_OR_PARTITION; metadata above ``max_metadata_bytes``:
OFFSET_METADATA_TOO_LARGE) and the others are written together
(``offsets.OffsetStore``).

Transactional offsets (TxnOffsetCommit) are kept by the transactions'
side until their transaction commits (``broker.kafka.txns``); a fetch with
``require_stable`` answers UNSTABLE_OFFSET_COMMIT for a partition that has
such pending offsets (the ``PendingTxnOffsets`` it is given), as Kafka does.

``OffsetCommits`` owns none of the groups (the ``GroupTable`` it is given)
nor the offsets (the ``OffsetStore``): it holds the rules above and what it
needs to check a partition (the topics).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from broker.api import Topics
from broker.errors import BrokerError, WrongHostError
from broker.kafka.consumer_groups._table import GroupTable
from broker.kafka.consumer_groups.offsets import CommittedOffset, OffsetStore, TopicPartition
from broker.kafka.consumer_groups.states import ConsumerGroupState
from broker.kafka.consumer_groups.subscriptions import UNREADABLE, subscribed_topics
from broker.kafka.error_codes import error_code
from broker.kafka.partitions import partition_segments
from broker.segments.names import is_system_topic
from ledger.errors import LedgerError

__all__ = ["OffsetCommitItem", "OffsetCommits", "PendingTxnOffsets"]

log = logging.getLogger(__name__)

_S = ConsumerGroupState

#: The partitions of a group with transactional offsets not yet committed.
PendingTxnOffsets = Callable[[str], set[TopicPartition]]


@dataclass(frozen=True, slots=True)
class OffsetCommitItem:
    """One partition of an OffsetCommit or TxnOffsetCommit."""

    topic: str
    partition: int
    offset: CommittedOffset


class OffsetCommits:
    """The groups' offset commits, fetches and deletions (module docstring).

    Args:
        topics: the broker's topics (which partitions a topic has).
        store: the committed offsets.
        table: the groups.
        max_metadata_bytes: ``offset.metadata.max.bytes``.
        pending_txn_offsets: a group's partitions with transactional offsets pending.
    """

    def __init__(self, topics: Topics, store: OffsetStore, table: GroupTable,
                 max_metadata_bytes: int, pending_txn_offsets: PendingTxnOffsets) -> None:
        self._topics = topics
        self._store = store
        self._table = table
        self._max_metadata_bytes = max_metadata_bytes
        self._pending_txn_offsets = pending_txn_offsets

    def commit_error(self, group_id: str, generation: int, member_id: str,
                     group_instance_id: str | None = None) -> ErrorCode:
        """Whether a commit by (generation, member) may go ahead: NONE or the error."""
        error = self._table.group_id_error(group_id)
        if error is not ErrorCode.none:
            return error
        if self._table.fenced(group_id, member_id, group_instance_id):
            return ErrorCode.fenced_instance_id
        group = self._table.get(group_id)
        if group is None:
            # Kafka creates the group for a commit without generation.
            return ErrorCode.none if generation < 0 else ErrorCode.illegal_generation
        if group.state is _S.DEAD:
            return ErrorCode.coordinator_not_available
        if generation < 0 and not member_id and not group.members:
            return ErrorCode.none
        if member_id not in group.members:
            return ErrorCode.unknown_member_id
        if generation != group.generation:
            return ErrorCode.illegal_generation
        if group.state is _S.COMPLETING_REBALANCE:
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    async def partition_errors(self, items: Iterable[OffsetCommitItem],
                               ) -> dict[TopicPartition, ErrorCode]:
        """Per partition: NONE, or why it cannot be committed (unknown, metadata too large)."""
        known: dict[str, set[int] | ErrorCode] = {}
        errors: dict[TopicPartition, ErrorCode] = {}
        for item in items:
            if item.topic not in known:
                known[item.topic] = await self._partitions_of(item.topic)
            partitions = known[item.topic]
            metadata = item.offset.metadata or ""
            if isinstance(partitions, ErrorCode):
                errors[(item.topic, item.partition)] = partitions
            elif item.partition not in partitions:
                errors[(item.topic, item.partition)] = ErrorCode.unknown_topic_or_partition
            elif len(metadata.encode()) > self._max_metadata_bytes:
                errors[(item.topic, item.partition)] = ErrorCode.offset_metadata_too_large
            else:
                errors[(item.topic, item.partition)] = ErrorCode.none
        return errors

    async def _partitions_of(self, topic: str) -> set[int] | ErrorCode:
        if not topic or is_system_topic(topic):
            return ErrorCode.unknown_topic_or_partition
        try:
            return {segment.number for segment in await partition_segments(self._topics, topic)}
        except (BrokerError, LedgerError) as error:
            return error_code(error)

    async def commit(self, group_id: str, generation: int, member_id: str,
                     items: list[OffsetCommitItem],
                     group_instance_id: str | None = None) -> dict[TopicPartition, ErrorCode]:
        """An OffsetCommit: the error of each partition."""
        error = self.commit_error(group_id, generation, member_id, group_instance_id)
        if error is not ErrorCode.none:
            return {(item.topic, item.partition): error for item in items}
        errors = await self.partition_errors(items)
        return await self.write_offsets(group_id, items, errors)

    async def write_offsets(self, group_id: str, items: list[OffsetCommitItem],
                            errors: dict[TopicPartition, ErrorCode],
                            ) -> dict[TopicPartition, ErrorCode]:
        """Write the items whose error is NONE; the errors, a failed write's code included."""
        good = [item for item in items if errors[(item.topic, item.partition)] is ErrorCode.none]
        if good:
            self._table.get_or_add(group_id)  # Kafka creates it for a commit without generation
            try:
                await self._store.commit(group_id, [((item.topic, item.partition), item.offset)
                                                    for item in good])
            except (BrokerError, LedgerError) as failure:
                code = error_code(failure)
                log.warning("kafka group %s: offset commit failed: %s", group_id, failure)
                if isinstance(failure, WrongHostError):  # the group's container moved
                    code = ErrorCode.not_coordinator
                elif code in (ErrorCode.unknown_server_error, ErrorCode.kafka_storage_error):
                    # Kafka answers a failed log append so: clients retry it.
                    code = ErrorCode.coordinator_not_available
                for item in good:
                    errors[(item.topic, item.partition)] = code
        return errors

    def fetch(self, group_id: str, partitions: list[TopicPartition] | None,
              require_stable: bool) -> tuple[ErrorCode, list[tuple[TopicPartition,
                                                                   CommittedOffset | None,
                                                                   ErrorCode]]]:
        """An OffsetFetch of one group: (group error, (partition, offset or None, error) ...).

        ``partitions`` None: every partition the group committed.
        """
        error = self._table.group_id_error(group_id)
        if error is not ErrorCode.none:
            return error, []
        committed = self._store.offsets(group_id)
        asked = sorted(committed) if partitions is None else partitions
        unstable = self._pending_txn_offsets(group_id) if require_stable else set()
        answers: list[tuple[TopicPartition, CommittedOffset | None, ErrorCode]] = []
        for partition in asked:
            code = ErrorCode.unstable_offset_commit if partition in unstable else ErrorCode.none
            answers.append((partition, committed.get(partition), code))
        return ErrorCode.none, answers

    async def delete_offsets(self, group_id: str, partitions: list[TopicPartition],
                             ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """OffsetDelete: forget the group's committed offsets of ``partitions``.

        As Kafka: an unknown group is GROUP_ID_NOT_FOUND; a group with members
        of another protocol than ``consumer`` NON_EMPTY_GROUP; a partition of a
        topic a member subscribes to GROUP_SUBSCRIBED_TO_TOPIC (its offsets are
        in use); the others are deleted (a partition without an offset too:
        nothing to do). A failed write answers COORDINATOR_NOT_AVAILABLE (the
        client retries; tombstones written twice are harmless).
        """
        error = self._table.group_id_error(group_id)
        if error is not ErrorCode.none:
            return error, {}
        group = self._table.get(group_id)
        committed = self._store.offsets(group_id)
        if (group is None or group.state is _S.DEAD) and not committed:
            return ErrorCode.group_id_not_found, {}
        members = list(group.members.values()) if group is not None else []
        if members and group is not None and group.protocol_type not in (None, "",
                                                                          "consumer"):
            return ErrorCode.non_empty_group, {}
        subscribed: set[str] = set()
        for member in members:  # every protocol's subscription (it names the same topics)
            for _, metadata in member.protocols:
                subscribed |= subscribed_topics(metadata)
        every = bool(subscribed & UNREADABLE)
        answers = {tp: ErrorCode.group_subscribed_to_topic if every or tp[0] in subscribed
                   else ErrorCode.none for tp in partitions}
        doomed = [tp for tp, code in answers.items() if code is ErrorCode.none and tp in committed]
        if doomed:
            try:
                await self._store.delete_offsets(group_id, doomed)
            except (BrokerError, LedgerError) as failure:
                log.warning("kafka group %s: deleting offsets failed: %s", group_id, failure)
                return ErrorCode.coordinator_not_available, {}
            log.info("kafka group %s: offsets of %d partitions deleted", group_id, len(doomed))
        return ErrorCode.none, answers
