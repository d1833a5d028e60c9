"""Share groups for ``folio group`` (``broker.kafka.consumer_groups.report`` asks here).

A share group is listed with protocol type ``share`` and Kafka's state
(Empty, Stable) and described as a Kafka group: its members with their
assigned partitions (a partition shared by several members shows them all,
comma-separated, as its member), each share partition's start offset (SPSO)
as the committed offset and its lag as DescribeShareGroupOffsets v1 counts
it (``share_lag``: the records from the SPSO to the end not yet acknowledged
or archived). Deleting one is DeleteGroups' rule (refused while it has
members). ``lags`` gives every share partition's lag and in-flight records
for the metrics (``GroupReport.update_lag``, the maintenance round). In a
cluster (``states``) each share partition is asked of its leader.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.errors import InvalidArgumentError, ReaderGroupNotEmptyError
from broker.groups.kafka_view import (
    KafkaGroupDetail,
    KafkaGroupListing,
    KafkaGroupMember,
    KafkaPartitionLag,
)
from broker.kafka.share_groups.admin import ShareStates
from broker.kafka.share_groups.coordinator import ShareCoordinator
from broker.kafka.share_groups.membership import ShareGroup
from broker.kafka.share_groups.records import ShareRecords, share_lag

__all__ = ["ShareReport"]

#: (group, topic, partition as a string): a metric series' labels.
SeriesKey = tuple[str, str, str]


class ShareReport:
    """The share groups as ``folio group`` shows them (module docstring)."""

    def __init__(self, shares: ShareCoordinator, states: ShareStates | None = None) -> None:
        self._shares = shares
        #: The share partitions at their leaders (a cluster's; None: all here).
        self._states = states
        #: Groups with share state written, as the last ``written`` read it (a group
        #: with no member since a restart is listed by it).
        self._written_groups: set[str] = set()

    def listing(self) -> list[KafkaGroupListing]:
        """Every share group known in memory, and those with share state written at the
        last ``written`` (Empty, no members: none came back since a restart)."""
        known = self._shares.groups.groups()
        found = [KafkaGroupListing(group.group_id, group.state, "share", len(group.members))
                 for group in known.values()]
        found += [KafkaGroupListing(name, "Empty", "share", 0)
                  for name in sorted(self._written_groups - set(known))
                  if not self._shares.groups.in_use_elsewhere(name)]
        return found

    def group(self, name: str) -> ShareGroup | None:
        """The share group ``name``, None if it is not one known here."""
        return self._shares.groups.group(name)

    async def describe(self, name: str, group: ShareGroup | None,
                       ends: dict[tuple[str, int], int]) -> KafkaGroupDetail:
        """The group (None: not in memory, only its share state written: Empty, as
        after a restart); ``ends``: partitions' end offsets (-1 where missing)."""
        members = tuple(
            KafkaGroupMember(m.member_id, "", m.client_id, m.client_host,
                             tuple(sorted((topic, p) for topic, numbers in m.assigned.items()
                                          for p in numbers)))
            for m in (group.members.values() if group is not None else ()))
        holders: dict[tuple[str, int], list[str]] = {}
        for member in members:
            for key in member.assigned:
                holders.setdefault(key, []).append(member.member_id)
        started = await self.started(name)
        partitions = []
        for topic, number in sorted({*started, *holders}):
            end = ends.get((topic, number), -1)
            start, lag = await self._start_and_lag(name, topic, number, end)
            partitions.append(KafkaPartitionLag(
                topic, number, start, end, ",".join(holders.get((topic, number), [])),
                share_lag=lag))
        if group is None:
            return KafkaGroupDetail(name, "Empty", "share", "simple", 0, members,
                                    tuple(partitions))
        return KafkaGroupDetail(name, group.state, "share", "simple", group.group_epoch,
                                members, tuple(partitions))

    async def written(self) -> dict[tuple[str, str, int], ShareRecords]:
        """Every share partition written (group, topic, partition), with its records: those
        loaded here as they are now, the others as last written (raises what the store
        raises)."""
        every = await self._shares.store.every_records()
        self._written_groups = {group_id for group_id, _, _ in every}
        for group_id, topic, number in every:
            loaded = self._shares.partitions.get(group_id, topic, number)
            if loaded is not None:
                every[group_id, topic, number] = loaded.records
        return every

    @staticmethod
    def lags(written: dict[tuple[str, str, int], ShareRecords],
             ends: dict[tuple[str, int], int],
             ) -> tuple[dict[SeriesKey, int], dict[SeriesKey, int]]:
        """Each share partition's lag and in-flight records (``written``), by series key;
        a partition whose end is not in ``ends`` (its topic not listed) is left out."""
        lags: dict[SeriesKey, int] = {}
        in_flight: dict[SeriesKey, int] = {}
        for (group_id, topic, number), records in written.items():
            end = ends.get((topic, number))
            if end is not None:
                key = (group_id, topic, str(number))
                lags[key] = share_lag(records, end)
                in_flight[key] = records.in_flight()
        return lags, in_flight

    async def started(self, name: str) -> list[tuple[str, int]]:
        """The (topic, partition) of every share partition of the group written."""
        if self._states is not None:
            return await self._states.listed(name)
        return await self._shares.store.share_partitions(name)

    async def _start_and_lag(self, group_id: str, topic: str, number: int,
                             end: int) -> tuple[int, int | None]:
        """The share partition's start offset (-1: never started) and lag (None then)."""
        if self._states is not None:
            start, lag = await self._states.describe(group_id, topic, number)
            return start, (None if start < 0 else lag)
        records = await self._shares.partitions.records_of(group_id, topic, number)
        return (-1, None) if records is None else (records.start, share_lag(records, end))

    async def delete(self, name: str) -> None:
        """Delete an empty share group (``ReaderGroupNotEmptyError`` with members)."""
        self.check_empty(name)
        await self._shares.delete_group(name, self._states)
        self._written_groups.discard(name)  # (one deleted by DeleteGroups: at the next round)

    def check_empty(self, name: str) -> None:
        """``ReaderGroupNotEmptyError`` (a share group's) while the group has members."""
        group = self._shares.groups.group(name)
        if group is not None and group.members:
            raise ReaderGroupNotEmptyError(name, sorted(group.members), share=True)

    async def is_share_group(self, name: str) -> bool:
        """Whether ``name`` is a share group here: known now, or with share state written
        (after a restart, before any member joined again)."""
        return await self._shares.is_share_group(name)

    async def starts(self, name: str) -> dict[tuple[str, int], int]:
        """Each share partition's start offset (SPSO), by (topic, partition)."""
        starts = {}
        for topic, number in await self.started(name):
            start, _ = await self._start_and_lag(name, topic, number, -1)
            if start >= 0:
                starts[topic, number] = start
        return starts

    async def move_starts(self, name: str, plan: list[tuple[str, int, int]]) -> None:
        """Start each (topic, partition) of an empty group at its offset, nothing in flight
        (AlterShareGroupOffsets' write, ``SharePartitions.reset``), one after another.

        Raises what the store raises: that partition's outcome is unknown and the
        rest not written; the same plan again settles it (absolute offsets).
        """
        for topic, number, start in plan:
            if self._states is None:
                await self._shares.partitions.reset(name, topic, number, start)
                continue
            code, message = await self._states.reset(name, topic, number, start)
            if code is not ErrorCode.none:
                raise InvalidArgumentError(
                    f"share partition {topic}/{number} of group {name!r}: {message or code.name}")
