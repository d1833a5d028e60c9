"""The classic group coordinator: parts that own their state, composed.

Kafka's ``GroupCoordinator`` holds a ``GroupMetadataManager`` the same way.
The parts: ``_table`` (``GroupTable``: the groups by id, the group id rule,
static members' fencing); ``membership`` (``GroupMembership``: JoinGroup,
SyncGroup, Heartbeat, LeaveGroup) with its ``_rebalance`` (``Rebalancer``:
rebalance and session timers, completing joins, recording a generation, the
leader's assignment, its background tasks); ``_commits``
(``OffsetCommits``: OffsetCommit, OffsetFetch, OffsetDelete and the checks
TxnOffsetCommit shares); ``_group_records`` (``GroupRecords``: loading the
groups at start or with a container, writing a group's record, DeleteGroups);
``_listing`` (``GroupSummaries``: DescribeGroups, ListGroups). The offsets
and records themselves are in the ``OffsetStore`` (``offsets``).
``GroupCoordinator`` builds them, passes each its collaborators, and makes
the calls the handlers, the transactions' side (``broker.kafka.txns``), the
report (``report``) and the cluster's container hand-over make; no part
reads another's fields.

``pending_txn_offsets`` is set by the transactions' side: the partitions of a
group with transactional offsets not yet committed (a fetch with
``require_stable`` answers UNSTABLE_OFFSET_COMMIT for them).
"""

from __future__ import annotations

from collections.abc import Iterable

from kio.schema.errors import ErrorCode

from broker.api import Topics
from broker.kafka.consumer_groups._commits import (
    OffsetCommitItem,
    OffsetCommits,
    PendingTxnOffsets,
)
from broker.kafka.consumer_groups._group_records import GroupRecords
from broker.kafka.consumer_groups._listing import GroupSummaries, GroupSummary
from broker.kafka.consumer_groups._table import GroupTable
from broker.kafka.consumer_groups.members import Group, JoinRequest, JoinResult, SyncResult
from broker.kafka.consumer_groups.membership import GroupConfig, GroupMembership
from broker.kafka.consumer_groups.offsets import CommittedOffset, OffsetStore, TopicPartition
from broker.kafka.consumer_groups.states import ConsumerGroupState

__all__ = ["GroupCoordinator", "GroupSummary", "OffsetCommitItem", "PendingTxnOffsets"]


class GroupCoordinator:
    """Every consumer group this broker coordinates, with their offsets in ``_kafka_offsets``.

    Args:
        topics: the broker's topics (which partitions a commit may name).
        store: the committed offsets and group records.
        config: the limits; None: Kafka's defaults.
    """

    def __init__(self, topics: Topics, store: OffsetStore,
                 config: GroupConfig | None = None) -> None:
        self.config = config or GroupConfig()
        self.store = store
        self.pending_txn_offsets: PendingTxnOffsets = lambda group_id: set()
        self._table = GroupTable(self.config.max_group_id_bytes)
        self._records = GroupRecords(store, self._table)
        self._membership = GroupMembership(self.config, self._records.write_group, self._table)
        # A lambda, not the attribute: the transactions' side replaces it later.
        self._commits = OffsetCommits(
            topics, store, self._table, self.config.max_metadata_bytes,
            lambda group_id: self.pending_txn_offsets(group_id))  # noqa: PLW0108
        self._listing = GroupSummaries(self._table)

    # ------------------------------------------------------------ loading, containers

    async def start(self) -> None:
        """Load offsets and group records; groups whose members were kept go on
        (``_classic_state``), the others are Empty."""
        for group in await self._records.load():
            self._membership.resume(group)

    async def load_container(self, container: int) -> None:
        """Coordinate the groups of ``container`` (a cluster broker claimed it): load them."""
        self.drop_container(container)  # anything left from an earlier ownership is stale
        for group in await self._records.load_container(container):
            self._membership.resume(group)

    def drop_container(self, container: int) -> None:
        """Stop coordinating the groups of ``container``: their members and timers go.

        Their members get NOT_COORDINATOR from here on and find the new
        coordinator, which loads them with the group (``_classic_state``).
        """
        for group_id in [g for g in self.groups() if self.store.container_of(g) == container]:
            self._membership.forget(group_id, ErrorCode.not_coordinator)
        self.store.forget_container(container)

    def hand_over(self, group_id: str) -> None:
        """Forget the group (a consumer-protocol group now: ``mixed``); its waiting calls
        get REBALANCE_IN_PROGRESS, so its members rejoin there."""
        self._membership.forget(group_id, ErrorCode.rebalance_in_progress)

    def adopt(self, group: Group) -> None:
        """Coordinate a group downgraded from the consumer protocol (``mixed``)."""
        self._membership.adopt(group)

    def close(self) -> None:
        """Cancel every timer (the listener stops)."""
        self._membership.close()

    # ------------------------------------------------------------ the groups

    def group_id_error(self, group_id: str | None) -> ErrorCode:
        """INVALID_GROUP_ID for an empty or too long id, else NONE."""
        return self._table.group_id_error(group_id)

    def group(self, group_id: str) -> Group | None:
        """The group, None if it is not known."""
        return self._table.get(group_id)

    def groups(self) -> dict[str, Group]:
        """Every group known in memory, by id."""
        return self._table.by_id()

    def fenced(self, group_id: str, member_id: str, group_instance_id: str | None) -> bool:
        """Whether a request of ``member_id`` as static ``group_instance_id`` is fenced."""
        return self._table.fenced(group_id, member_id, group_instance_id)

    # ------------------------------------------------------------ membership

    async def join(self, request: JoinRequest) -> JoinResult:
        """Answer one JoinGroup (waits until the rebalance it belongs to completes)."""
        return await self._membership.join(request)

    async def sync(self, group_id: str, generation: int, member_id: str,
                   protocol_type: str | None, protocol_name: str | None,
                   assignments: dict[str, bytes],
                   group_instance_id: str | None = None) -> SyncResult:
        """Answer one SyncGroup: the member's assignment once the leader sent them."""
        return await self._membership.sync(group_id, generation, member_id, protocol_type,
                                           protocol_name, assignments, group_instance_id)

    def heartbeat(self, group_id: str, generation: int, member_id: str,
                  group_instance_id: str | None = None) -> ErrorCode:
        """Answer one Heartbeat: NONE, or what the member must do."""
        return self._membership.heartbeat(group_id, generation, member_id, group_instance_id)

    def leave(self, group_id: str, members: list[tuple[str, str | None]],
              ) -> list[ErrorCode]:
        """Remove each (member id, group instance id); the error of each."""
        return self._membership.leave(group_id, members)

    # ------------------------------------------------------------ offsets

    def commit_error(self, group_id: str, generation: int, member_id: str,
                     group_instance_id: str | None = None) -> ErrorCode:
        """Whether a commit by (generation, member) may go ahead: NONE or the error."""
        return self._commits.commit_error(group_id, generation, member_id, group_instance_id)

    async def partition_errors(self, items: Iterable[OffsetCommitItem],
                               ) -> dict[TopicPartition, ErrorCode]:
        """Per partition: NONE, or why it cannot be committed (unknown, metadata too large)."""
        return await self._commits.partition_errors(items)

    async def commit(self, group_id: str, generation: int, member_id: str,
                     items: list[OffsetCommitItem],
                     group_instance_id: str | None = None) -> dict[TopicPartition, ErrorCode]:
        """An OffsetCommit: the error of each partition."""
        return await self._commits.commit(group_id, generation, member_id, items,
                                          group_instance_id)

    async def write_offsets(self, group_id: str, items: list[OffsetCommitItem],
                            errors: dict[TopicPartition, ErrorCode],
                            ) -> dict[TopicPartition, ErrorCode]:
        """Write the items whose error is NONE; the errors, a failed write's code included."""
        return await self._commits.write_offsets(group_id, items, errors)

    def fetch(self, group_id: str, partitions: list[TopicPartition] | None,
              require_stable: bool) -> tuple[ErrorCode, list[tuple[TopicPartition,
                                                                   CommittedOffset | None,
                                                                   ErrorCode]]]:
        """An OffsetFetch of one group (``OffsetCommits.fetch``)."""
        return self._commits.fetch(group_id, partitions, require_stable)

    async def delete_offsets(self, group_id: str, partitions: list[TopicPartition],
                             ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """OffsetDelete (``OffsetCommits.delete_offsets``)."""
        return await self._commits.delete_offsets(group_id, partitions)

    # ------------------------------------------------------------ deletion, listings

    async def delete_group(self, group_id: str) -> ErrorCode:
        """DeleteGroups of one group (``GroupRecords.delete_group``)."""
        return await self._records.delete_group(group_id)

    async def delete_empty(self, group_id: str) -> None:
        """Delete a known, Empty group; raises a failed write (``GroupRecords.delete_empty``)."""
        await self._records.delete_empty(group_id)

    def describe(self, group_id: str) -> tuple[ErrorCode, GroupSummary]:
        """A DescribeGroups entry; an unknown group is Dead (no error), as in Kafka."""
        return self._listing.describe(group_id)

    def list_groups(self, states: set[ConsumerGroupState] | None, types: set[str] | None,
                    ) -> list[GroupSummary]:
        """Every group, filtered by state and protocol type (None: any)."""
        return self._listing.list_groups(states, types)
