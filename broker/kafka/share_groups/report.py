"""Share groups for ``folio group`` (``broker.kafka.consumer_groups.report`` asks here).

A share group is listed with protocol type ``share`` and Kafka's state
(Empty, Stable) and described as a Kafka group: its members with their
assigned partitions (a partition shared by several members shows them all,
comma-separated, as its member), each share partition's start offset (SPSO)
as the committed offset, so the lag shown is the records from the SPSO to
the end (those acknowledged above it included: DescribeShareGroupOffsets v1
answers the exact count). Deleting one is DeleteGroups' rule (refused while
it has members).
"""

from __future__ import annotations

from broker.errors import ReaderGroupNotEmptyError
from broker.groups.kafka_view import (
    KafkaGroupDetail,
    KafkaGroupListing,
    KafkaGroupMember,
    KafkaPartitionLag,
)
from broker.kafka.share_groups.admin import ShareStates
from broker.kafka.share_groups.coordinator import ShareCoordinator
from broker.kafka.share_groups.membership import ShareGroup

__all__ = ["ShareReport"]


class ShareReport:
    """The share groups as ``folio group`` shows them (module docstring)."""

    def __init__(self, shares: ShareCoordinator, states: ShareStates | None = None) -> None:
        self._shares = shares
        #: The share partitions at their leaders (a cluster's; None: all here).
        self._states = states

    def listing(self) -> list[KafkaGroupListing]:
        """Every share group known in memory."""
        return [KafkaGroupListing(group.group_id, group.state, "share", len(group.members))
                for group in self._shares.groups.groups().values()]

    def group(self, name: str) -> ShareGroup | None:
        """The share group ``name``, None if it is not one known here."""
        return self._shares.groups.group(name)

    async def describe(self, group: ShareGroup,
                       ends: dict[tuple[str, int], int]) -> KafkaGroupDetail:
        """The group; ``ends``: partitions' end offsets (-1 where missing)."""
        members = tuple(
            KafkaGroupMember(m.member_id, "", m.client_id, m.client_host,
                             tuple(sorted((topic, p) for topic, numbers in m.assigned.items()
                                          for p in numbers)))
            for m in group.members.values())
        holders: dict[tuple[str, int], list[str]] = {}
        for member in members:
            for key in member.assigned:
                holders.setdefault(key, []).append(member.member_id)
        started = await self.started(group.group_id)
        partitions = []
        for topic, number in sorted({*started, *holders}):
            partitions.append(KafkaPartitionLag(
                topic, number, await self._start(group.group_id, topic, number),
                ends.get((topic, number), -1), ",".join(holders.get((topic, number), []))))
        return KafkaGroupDetail(group.group_id, group.state, "share", "simple",
                                group.group_epoch, members, tuple(partitions))

    async def started(self, name: str) -> list[tuple[str, int]]:
        """The (topic, partition) of every share partition of the group written."""
        if self._states is not None:
            return await self._states.listed(name)
        return await self._shares.store.share_partitions(name)

    async def _start(self, group_id: str, topic: str, number: int) -> int:
        """The share partition's start offset, -1 if never started."""
        if self._states is not None:
            return (await self._states.describe(group_id, topic, number))[0]
        records = await self._shares.partitions.records_of(group_id, topic, number)
        return -1 if records is None else records.start

    async def delete(self, name: str) -> None:
        """Delete an empty share group (``ReaderGroupNotEmptyError`` with members)."""
        group = self._shares.groups.group(name)
        if group is not None and group.members:
            raise ReaderGroupNotEmptyError(name, sorted(group.members))
        await self._shares.delete_group(name, self._states)
