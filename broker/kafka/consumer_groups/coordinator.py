"""The group coordinator: membership (``membership``) plus committed offsets and group listings.

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
such pending offsets (``pending_txn_offsets``), as Kafka does.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from broker.api import Topics
from broker.errors import BrokerError, WrongHostError
from broker.kafka.consumer_groups.members import Group, JoinResult, SyncResult
from broker.kafka.consumer_groups.membership import GroupConfig, GroupMembership
from broker.kafka.consumer_groups.offsets import (
    CommittedOffset,
    ConsumerGroupRecord,
    OffsetStore,
    TopicPartition,
)
from broker.kafka.consumer_groups.states import ConsumerGroupState
from broker.kafka.consumer_groups.subscriptions import UNREADABLE, subscribed_topics
from broker.kafka.error_codes import error_code
from broker.kafka.partitions import partition_segments
from broker.segments.names import is_system_topic
from ledger.errors import LedgerError

__all__ = ["GroupCoordinator", "GroupSummary", "OffsetCommitItem"]

log = logging.getLogger(__name__)

_S = ConsumerGroupState


@dataclass(frozen=True, slots=True)
class OffsetCommitItem:
    """One partition of an OffsetCommit or TxnOffsetCommit."""

    topic: str
    partition: int
    offset: CommittedOffset


@dataclass(frozen=True, slots=True)
class GroupSummary:
    """A group as DescribeGroups and ListGroups show it.

    ``members``: (member id, group instance id, client id, client host,
    metadata of the chosen protocol, assignment).
    """

    group_id: str
    state: ConsumerGroupState
    protocol_type: str
    protocol_name: str
    members: tuple[tuple[str, str | None, str, str, bytes, bytes], ...] = ()


#: The partitions of a group with transactional offsets not yet committed.
PendingTxnOffsets = Callable[[str], set[TopicPartition]]


class GroupCoordinator(GroupMembership):
    """Every consumer group this broker coordinates, with their offsets in ``_kafka_offsets``."""

    def __init__(self, topics: Topics, store: OffsetStore,
                 config: GroupConfig | None = None) -> None:
        super().__init__(config or GroupConfig(), self._write_group)
        self._topics = topics
        self.store = store
        self.pending_txn_offsets: PendingTxnOffsets = lambda group_id: set()

    async def start(self) -> None:
        """Load offsets and group records; groups known only from them are Empty."""
        await self.store.load()
        self._add_stored_groups(self.store.group_ids())

    async def load_container(self, container: int) -> None:
        """Coordinate the groups of ``container`` (a cluster broker claimed it): load them."""
        self.drop_container(container)  # anything left from an earlier ownership is stale
        await self.store.load_container(container)
        self._add_stored_groups(g for g in self.store.group_ids()
                                if self.store.container_of(g) == container)

    def drop_container(self, container: int) -> None:
        """Stop coordinating the groups of ``container``: their members and timers go.

        Their members get NOT_COORDINATOR from here on and find the new
        coordinator, where they join again from their committed offsets.
        """
        for group_id in [g for g in self.groups() if self.store.container_of(g) == container]:
            group = self.groups().pop(group_id)
            self._cancel_rebalance_timer(group)
            for handle in group.pending.values():
                handle.cancel()
            for member in group.members.values():
                if member.expiry is not None:
                    member.expiry.cancel()
                if member.join_waiter is not None and not member.join_waiter.done():
                    member.join_waiter.set_result(
                        JoinResult(ErrorCode.not_coordinator, member.member_id))
                if member.sync_waiter is not None and not member.sync_waiter.done():
                    member.sync_waiter.set_result(SyncResult(ErrorCode.not_coordinator))
        self.store.forget_container(container)

    def _add_stored_groups(self, group_ids: Iterable[str]) -> None:
        for group_id in group_ids:
            group = Group(group_id)
            record = self.store.group_record(group_id)
            if record is not None:
                group.generation = record.generation
                group.protocol_type = record.protocol_type
            self.groups()[group_id] = group

    async def _write_group(self, group: Group) -> None:
        await self.store.write_group(group.group_id, ConsumerGroupRecord(
            group.generation, group.protocol_type, group.protocol_name))

    # ------------------------------------------------------------ offsets

    def commit_error(self, group_id: str, generation: int, member_id: str,
                     group_instance_id: str | None = None) -> ErrorCode:
        """Whether a commit by (generation, member) may go ahead: NONE or the error."""
        error = self.group_id_error(group_id)
        if error is not ErrorCode.none:
            return error
        if self.fenced(group_id, member_id, group_instance_id):
            return ErrorCode.fenced_instance_id
        group = self.group(group_id)
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
            elif len(metadata.encode()) > self.config.max_metadata_bytes:
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
            if self.group(group_id) is None:
                self.groups()[group_id] = Group(group_id)
            try:
                await self.store.commit(group_id, [((item.topic, item.partition), item.offset)
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
        error = self.group_id_error(group_id)
        if error is not ErrorCode.none:
            return error, []
        committed = self.store.offsets(group_id)
        asked = sorted(committed) if partitions is None else partitions
        unstable = self.pending_txn_offsets(group_id) if require_stable else set()
        answers: list[tuple[TopicPartition, CommittedOffset | None, ErrorCode]] = []
        for partition in asked:
            code = ErrorCode.unstable_offset_commit if partition in unstable else ErrorCode.none
            answers.append((partition, committed.get(partition), code))
        return ErrorCode.none, answers

    async def delete_group(self, group_id: str) -> ErrorCode:
        """DeleteGroups of one group: only an empty one (NON_EMPTY_GROUP), with its offsets.

        The group is Dead while its tombstones are written (requests for it
        answer COORDINATOR_NOT_AVAILABLE), then forgotten; if the write fails
        it is Empty again and the error is answered.
        """
        error = self.group_id_error(group_id)
        if error is not ErrorCode.none:
            return error
        group = self.group(group_id)
        if group is None or group.state is _S.DEAD:
            return ErrorCode.group_id_not_found
        if group.state is not _S.EMPTY or group.pending:
            return ErrorCode.non_empty_group
        try:
            await self.delete_empty(group_id)
        except (BrokerError, LedgerError) as failure:
            log.warning("kafka group %s: deletion failed: %s", group_id, failure)
            return ErrorCode.coordinator_not_available
        return ErrorCode.none

    async def delete_empty(self, group_id: str) -> None:
        """Delete ``group_id``, known, Empty and with no pending member; raises a failed write.

        After a failure it is Empty again, some of its tombstones maybe
        written (the outcome is unknown: a deletion may be asked again).
        """
        group = self.groups()[group_id]
        group.move(_S.DEAD)
        try:
            await self.store.delete_group(group_id)
        except BaseException:
            group.state = _S.EMPTY  # nothing changed for its members: there are none
            raise
        if self.groups().get(group_id) is group:
            del self.groups()[group_id]
        log.info("kafka group %s: deleted", group_id)

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
        error = self.group_id_error(group_id)
        if error is not ErrorCode.none:
            return error, {}
        group = self.group(group_id)
        committed = self.store.offsets(group_id)
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
                await self.store.delete_offsets(group_id, doomed)
            except (BrokerError, LedgerError) as failure:
                log.warning("kafka group %s: deleting offsets failed: %s", group_id, failure)
                return ErrorCode.coordinator_not_available, {}
            log.info("kafka group %s: offsets of %d partitions deleted", group_id, len(doomed))
        return ErrorCode.none, answers

    # ------------------------------------------------------------ listings

    def describe(self, group_id: str) -> tuple[ErrorCode, GroupSummary]:
        """A DescribeGroups entry; an unknown group is Dead (no error), as in Kafka."""
        error = self.group_id_error(group_id)
        group = self.group(group_id) if error is ErrorCode.none else None
        if group is None:
            return error, GroupSummary(group_id, _S.DEAD, "", "")
        stable = group.state is _S.STABLE
        members = tuple(
            (m.member_id, m.group_instance_id, m.client_id, m.client_host,
             m.metadata_of(group.protocol_name) if stable else b"",
             m.assignment if stable else b"")
            for m in group.members.values())
        return ErrorCode.none, GroupSummary(group_id, group.state, group.protocol_type or "",
                                            group.protocol_name or "", members)

    def list_groups(self, states: set[ConsumerGroupState] | None, types: set[str] | None,
                    ) -> list[GroupSummary]:
        """Every group, filtered by state and protocol type (None: any)."""
        found = []
        for group_id in sorted(self.groups()):
            group = self.groups()[group_id]
            if group.state is _S.DEAD:
                continue
            if states is not None and group.state not in states:
                continue
            if types is not None and (group.protocol_type or "") not in types:
                continue
            found.append(GroupSummary(group_id, group.state, group.protocol_type or "",
                                      group.protocol_name or ""))
        return found
