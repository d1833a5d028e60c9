"""Kafka consumer groups for ``folio group`` and the lag metric: ``GroupReport``.

Implements ``broker.groups.kafka_view.KafkaGroups`` over the
``GroupCoordinator``: a listing from memory, and a description with each
member's assigned partitions (decoded from the consumer protocol's
assignment, as Kafka's ``kafka-consumer-groups --describe`` does), each
partition's committed offset, end offset and lag. End offsets come from the
topics' segment lists (the loaded segment or its record: nothing is loaded,
nothing is read from bookies), as the reader groups' backlog does.

Share groups (KIP-932) are listed, described, reset (their start offsets,
as AlterShareGroupOffsets moves them) and deleted through
``broker.kafka.share_groups.report``.

Consumer-protocol groups (KIP-848, ``modern``) are listed, described (their
members' partitions are the coordinator's own assignment; the generation
shown is the group epoch, the protocol the server-side assignor), reset,
deleted and given lags the same way.

``reset`` and ``delete`` follow Kafka's rule: refused while the group has
members (or members joining), ``ReaderGroupNotEmptyError``.

``update_lag`` sets ``folio_group_lag{kind="kafka"}`` per group and
partition with a committed offset, and per share partition of a share group
(its share lag, ``share_groups.report.share_lag``, with
``folio_share_in_flight_records`` beside); it runs on the broker's
maintenance round (``TopicManager.add_maintenance_hook``), never per commit,
fetch or acknowledgement.

In a cluster a group this broker does not coordinate is answered with
``WrongHostError`` naming the offsets segment of its container and that
segment's owner (``where``), which the SDK follows.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Callable
from dataclasses import replace

from broker.api import Topics
from broker.errors import (
    BrokerError,
    InvalidArgumentError,
    ReaderGroupNotEmptyError,
    WrongHostError,
)
from broker.groups.kafka_view import (
    KafkaGroupDetail,
    KafkaGroupListing,
    KafkaGroupMember,
    KafkaPartitionLag,
    OffsetReset,
    kafka_group_not_found,
)
from broker.kafka.consumer_groups.coordinator import GroupCoordinator
from broker.kafka.consumer_groups.members import Group
from broker.kafka.consumer_groups.modern import ModernGroups
from broker.kafka.consumer_groups.modern_members import ModernGroup
from broker.kafka.consumer_groups.offset_reset import OffsetAt, new_offsets, reset_targets
from broker.kafka.consumer_groups.offsets import CommittedOffset
from broker.kafka.consumer_groups.states import ConsumerGroupState
from broker.kafka.share_groups.records import ShareRecords
from broker.kafka.share_groups.report import ShareReport
from broker.metrics import set_group_lags, set_share_in_flight
from ledger.errors import LedgerError

__all__ = ["GroupReport", "decode_assignment"]

log = logging.getLogger(__name__)

#: Groups whose lags ``update_lag`` computes before it lets other tasks run.
_GROUPS_PER_SLICE = 50

#: Where a group is coordinated in a cluster: None here, else the WrongHost to answer.
Where = Callable[[str], WrongHostError | None]


def decode_assignment(data: bytes) -> tuple[tuple[str, int], ...]:
    """The (topic, partition)s of a consumer protocol assignment; () if it is not one.

    ConsumerProtocolAssignment (every version so far): int16 version, then an
    array (int32 count) of topics, each a string (int16 length) and an array
    of int32 partitions, then user data (ignored).
    """
    try:
        (count,) = struct.unpack_from(">i", data, 2)
        at, found = 6, []
        for _ in range(count):
            (length,) = struct.unpack_from(">h", data, at)
            topic = data[at + 2:at + 2 + length].decode()
            at += 2 + length
            (partitions,) = struct.unpack_from(">i", data, at)
            at += 4
            found += [(topic, p) for p in struct.unpack_from(f">{partitions}i", data, at)]
            at += 4 * partitions
    except (struct.error, UnicodeDecodeError, ValueError):
        return ()
    return tuple(sorted(found))


class GroupReport:
    """The coordinator's groups, read-only, with end offsets and lags (module docstring)."""

    def __init__(self, coordinator: GroupCoordinator, topics: Topics,
                 where: Where | None = None, modern: ModernGroups | None = None,
                 offset_at: OffsetAt | None = None,
                 shares: ShareReport | None = None) -> None:
        self._coordinator = coordinator
        self._topics = topics
        self._where = where
        self._modern = modern
        #: A cluster: a segment's offset by time, read by the broker serving it.
        self._offset_at = offset_at
        #: Share groups (KIP-932; a standalone), listed, described, reset and deleted too.
        self._shares = shares
        #: The share partitions' records read at the last maintenance round.
        self._last_shared: dict[tuple[str, str, int], ShareRecords] = {}

    def _modern_group(self, name: str) -> ModernGroup | None:
        """The consumer-protocol (KIP-848) group ``name``, None if it is not one."""
        return None if self._modern is None else self._modern.group(name)

    def listing(self) -> tuple[list[KafkaGroupListing], bool]:
        groups = self._coordinator.groups()
        found = [KafkaGroupListing(name, group.state.value, group.protocol_type or "",
                                   len(group.members))
                 for name, group in sorted(groups.items())
                 if group.state is not ConsumerGroupState.DEAD
                 and self._modern_group(name) is None]  # (an Empty entry for its offsets)
        if self._modern is not None:  # KIP-848 groups: protocol type "consumer"
            found += [KafkaGroupListing(group.group_id, group.state.value, "consumer",
                                        len(group.members))
                      for group in self._modern.groups()]
            found.sort(key=lambda listing: listing.name)
        if self._shares is not None:
            found = sorted([*found, *self._shares.listing()], key=lambda listing: listing.name)
        return found, self._where is None

    def _moved(self, name: str) -> None:
        """Raise the WrongHost of a group another broker coordinates (cluster)."""
        moved = None if self._where is None else self._where(name)
        if moved is not None:
            raise moved

    def _known(self, name: str) -> Group:
        group = self._coordinator.group(name)
        if group is None or group.state is ConsumerGroupState.DEAD:
            self._moved(name)
            raise kafka_group_not_found(name)
        return group

    def _check_empty(self, name: str) -> None:
        """``ReaderGroupNotEmptyError`` unless the group is Empty with no member joining."""
        modern = self._modern_group(name)
        if modern is not None and modern.members:
            raise ReaderGroupNotEmptyError(name, sorted(modern.members))
        group = self._coordinator.group(name)
        if group is None:
            return
        members = sorted({*group.members, *group.pending})
        if members or group.state is not ConsumerGroupState.EMPTY:
            raise ReaderGroupNotEmptyError(name, members or [f"({group.state.value})"])

    async def delete(self, name: str) -> None:
        if self._shares is not None and self._shares.group(name) is not None:
            await self._shares.delete(name)
            return
        if self._modern is not None and self._modern_group(name) is not None:
            await self._modern.delete_empty(name)
            return
        self._known(name)
        self._check_empty(name)
        await self._coordinator.delete_empty(name)

    async def reset(self, name: str, spec: OffsetReset) -> KafkaGroupDetail:
        if not name:
            raise InvalidArgumentError("a Kafka consumer group's id must not be empty")
        if self._shares is not None and await self._share_group(name):
            return await self._reset_share(self._shares, name, spec)
        group = self._coordinator.group(name)
        modern = self._modern_group(name)
        known = modern is not None or (group is not None
                                       and group.state is not ConsumerGroupState.DEAD)
        if not known:
            self._moved(name)
            if not spec.names_partitions:  # a new group's offsets need their topics named
                raise kafka_group_not_found(name)
        self._check_empty(name)  # a dry run too, as Kafka's tool ("not inactive")
        committed = self._coordinator.store.offsets(name)
        chosen = await reset_targets(self._topics, spec, committed)
        if not chosen:
            raise InvalidArgumentError(f"Kafka consumer group {name!r} has no committed "
                                       "offsets: name the topics to reset")
        plan = await new_offsets(self._topics, spec, chosen, committed, self._offset_at)
        reset = tuple(KafkaPartitionLag(topic, partition, at, end)
                      for (topic, partition), at, end in plan)
        if spec.dry_run:
            before = (await self.describe(name) if known else
                      KafkaGroupDetail(name, ConsumerGroupState.DEAD.value, "", "", 0, (), ()))
            return replace(before, reset=reset)
        self._check_empty(name)  # again: a member may have joined while segments were listed
        # Window: a member joining during this write may fetch the offsets from
        # before it (Kafka's tool has the same race, checking then committing).
        # A failed write may have landed in part: nothing is remembered, and the
        # same reset may be asked again (absolute offsets; Kafka's rule too),
        # except a shift (the SDK sends a shift's plan as absolute offsets).
        await self._coordinator.store.commit(
            name, [(key, CommittedOffset(at)) for key, at, _ in plan])
        if self._coordinator.group(name) is None and self._modern_group(name) is None:
            self._coordinator.groups()[name] = Group(name)  # as a commit without generation
        return replace(await self.describe(name), reset=reset)

    async def _share_group(self, name: str) -> bool:
        """Whether ``name`` is a share group: one in memory, or, when no classic or
        consumer group here has the name, one with share state written (after a
        restart, before any member came back)."""
        if self._shares is None:
            return False
        if self._shares.group(name) is not None:
            return True
        other = self._coordinator.group(name)
        if self._modern_group(name) is not None or (
                other is not None and other.state is not ConsumerGroupState.DEAD):
            return False
        return await self._shares.is_share_group(name)

    async def _reset_share(self, shares: ShareReport, name: str,
                           spec: OffsetReset) -> KafkaGroupDetail:
        """A share group's reset: its share partitions' start offsets moved as
        AlterShareGroupOffsets moves them (``kafka-share-groups --reset-offsets``): only
        while it has no members, each share partition then starting at its new offset
        with nothing in flight. The start offset stands for the committed offset
        (``--shift-by``, ``--to-current``)."""
        shares.check_empty(name)  # a dry run too, as Kafka's tool
        starts = await shares.starts(name)
        committed = {key: CommittedOffset(at) for key, at in starts.items()}
        chosen = await reset_targets(self._topics, spec, committed)
        if not chosen:
            raise InvalidArgumentError(f"Kafka share group {name!r} has no share partitions "
                                       "yet: name the topics to reset")
        plan = await new_offsets(self._topics, spec, chosen, committed, self._offset_at)
        reset = tuple(KafkaPartitionLag(topic, partition, at, end)
                      for (topic, partition), at, end in plan)
        if not spec.dry_run:
            shares.check_empty(name)  # again: a member may have joined meanwhile
            # Window (Kafka's too): a member joining during these writes may fetch
            # from the old start before its share partition is reset; what it
            # acquired is then dropped by the reset (its acknowledgements answered
            # INVALID_RECORD_STATE) and handed out again from the new start.
            await shares.move_starts(name, [(t, p, at) for (t, p), at, _ in plan])
        return replace(await self.describe(name), reset=reset)

    async def describe(self, name: str) -> KafkaGroupDetail:
        shared = None if self._shares is None else self._shares.group(name)
        if self._shares is not None and await self._share_group(name):
            topics = {t for m in shared.members.values() for t in m.assigned} if shared else set()
            topics |= {t for t, _ in await self._shares_started(name)}
            return await self._shares.describe(name, shared, await self._end_offsets(topics))
        modern = self._modern_group(name)
        if modern is not None:
            return await self._describe_modern(modern)
        group = self._known(name)
        stable = group.state is ConsumerGroupState.STABLE
        members = tuple(
            KafkaGroupMember(m.member_id, m.group_instance_id or "", m.client_id, m.client_host,
                             decode_assignment(m.assignment)
                             if stable and group.protocol_type == "consumer" else ())
            for m in group.members.values())
        return await self._detail(name, group.state.value, group.protocol_type or "",
                                  group.protocol_name or "", group.generation, members)

    async def _describe_modern(self, group: ModernGroup) -> KafkaGroupDetail:
        """A KIP-848 group: its members' assigned partitions (the coordinator's own)."""
        members = tuple(
            KafkaGroupMember(m.member_id, m.instance_id or "", m.client_id, m.client_host,
                             tuple(sorted((topic, p) for topic, numbers in m.assigned.items()
                                          for p in numbers)))
            for m in group.members.values())
        return await self._detail(group.group_id, group.state.value, "consumer",
                                  group.assignor or "uniform", group.group_epoch, members)

    async def _detail(self, name: str, state: str, protocol_type: str, protocol: str,
                      generation: int, members: tuple[KafkaGroupMember, ...],
                      ) -> KafkaGroupDetail:
        owner = {tp: m.member_id for m in members for tp in m.assigned}
        committed = self._coordinator.store.offsets(name)
        ends = await self._end_offsets({topic for topic, _ in (*committed, *owner)})
        partitions = tuple(
            KafkaPartitionLag(topic, partition,
                              committed[(topic, partition)].offset
                              if (topic, partition) in committed else -1,
                              ends.get((topic, partition), -1), owner.get((topic, partition), ""),
                              (committed[(topic, partition)].metadata or "")
                              if (topic, partition) in committed else "")
            for topic, partition in sorted({*committed, *owner}))
        return KafkaGroupDetail(name, state, protocol_type, protocol, generation, members,
                                partitions)

    async def _shares_written(self) -> dict[tuple[str, str, int], ShareRecords]:
        """Every share partition's records (none without share groups); the store
        unreadable now: the last round's (logged), so the series do not blink out."""
        if self._shares is None:
            return {}
        try:
            self._last_shared = await self._shares.written()
        except (BrokerError, LedgerError) as error:
            log.warning("share group lag: share state not read, last round's kept: %s",
                        error)
        return self._last_shared

    async def _shares_started(self, name: str) -> list[tuple[str, int]]:
        return [] if self._shares is None else await self._shares.started(name)

    async def _end_offsets(self, topics: set[str]) -> dict[tuple[str, int], int]:
        """Each partition's end offset; a topic that cannot be listed is left out (-1)."""
        ends: dict[tuple[str, int], int] = {}
        for topic in topics:
            try:
                segments = await self._topics.list_segments(topic, include_sealed=True)
            except (BrokerError, LedgerError) as error:
                log.debug("kafka group lag: topic %s not listed: %s", topic, error)
                continue
            ends.update(((topic, s.number), s.end_offset) for s in segments)
        return ends

    async def update_lag(self) -> None:
        """Set ``folio_group_lag{kind="kafka"}`` of every committed partition (maintenance).

        ``python -m bench.group_lag``: ~35 ms of CPU for 32,000 committed
        partitions (1,000 groups); the loop is given back every
        ``_GROUPS_PER_SLICE`` groups all the same.
        """
        committed = {name: self._coordinator.store.offsets(name)
                     for name, group in list(self._coordinator.groups().items())
                     if group.state is not ConsumerGroupState.DEAD}
        for modern in self._modern.groups() if self._modern is not None else ():
            committed[modern.group_id] = self._coordinator.store.offsets(modern.group_id)
        shared = await self._shares_written()
        ends = await self._end_offsets({topic for offsets in committed.values()
                                        for topic, _ in offsets}
                                       | {topic for _, topic, _ in shared})
        lags: dict[tuple[str, str, str], int] = {}
        if self._shares is not None:
            # Share groups' lags beside (a group id is one kind's only), and their
            # in-flight records.
            lags, in_flight = self._shares.lags(shared, ends)
            set_share_in_flight(in_flight)
        for index, (name, offsets) in enumerate(committed.items(), start=1):
            for (topic, partition), offset in offsets.items():
                end = ends.get((topic, partition))
                if end is not None:
                    lags[(name, topic, str(partition))] = max(0, end - offset.offset)
            if index % _GROUPS_PER_SLICE == 0:
                await asyncio.sleep(0)  # others' turn: this is background work
        set_group_lags("kafka", lags)
