"""The classic groups' records: loading them at start (or with a container), writing a
generation's, deleting a group.

A group's record (``offsets.ConsumerGroupRecord``: its generation and
protocol) is written after every rebalance, so generations keep growing over
restarts and DescribeGroups knows the group; with it, in the same append, the
image of its members and their assignments (``_classic_state``), or a
tombstone for it once the group is empty. At start (or when a cluster broker
claims a container) every group with offsets or a record is known again, at
its recorded generation: Stable with its members if its image is of that
generation, else Empty.

DeleteGroups takes only an empty group (NON_EMPTY_GROUP otherwise) and
writes tombstones for its offsets and record: the group is Dead while they
are written (requests for it answer COORDINATOR_NOT_AVAILABLE), then
forgotten. A failed write may still have landed in part (unknown outcome):
the group is Empty again and a deletion may be asked again (a tombstone
written twice is harmless).

``GroupRecords`` owns neither the groups (the ``GroupTable`` it is given)
nor the records (the ``OffsetStore``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

from kio.schema.errors import ErrorCode

from broker.errors import BrokerError
from broker.kafka.consumer_groups._classic_state import classic_image, restore_classic
from broker.kafka.consumer_groups._table import GroupTable
from broker.kafka.consumer_groups.members import Group
from broker.kafka.consumer_groups.offsets import ConsumerGroupRecord, OffsetStore
from broker.kafka.consumer_groups.states import ConsumerGroupState
from ledger.errors import LedgerError

__all__ = ["GroupRecords"]

log = logging.getLogger(__name__)

_S = ConsumerGroupState


class GroupRecords:
    """Groups loaded from, recorded in and deleted from ``_kafka_offsets``."""

    def __init__(self, store: OffsetStore, table: GroupTable) -> None:
        self._store = store
        self._table = table

    async def load(self) -> list[Group]:
        """Load offsets and group records; the groups whose members were kept (their
        sessions are to start), the others Empty."""
        await self._store.load()
        return self._add_stored_groups(self._store.group_ids())

    async def load_container(self, container: int) -> list[Group]:
        """Load the groups of ``container`` (a cluster broker claimed it); as ``load``."""
        await self._store.load_container(container)
        return self._add_stored_groups(g for g in self._store.group_ids()
                                       if self._store.container_of(g) == container)

    def _add_stored_groups(self, group_ids: Iterable[str]) -> list[Group]:
        kept = []
        now_ms = int(time.time() * 1000)
        for group_id in group_ids:
            group = Group(group_id)
            record = self._store.group_record(group_id)
            if record is not None:
                group.generation = record.generation
                group.protocol_type = record.protocol_type
                # Empty since its record says so; a group whose members were not
                # kept (no image of this generation) lost them now: empty from now on.
                group.empty_since_ms = record.empty_since_ms or now_ms
                image = self._store.group_state(group_id)
                if image is not None and not record.modern and restore_classic(group, image):
                    group.empty_since_ms = None
                    kept.append(group)
            self._table.put(group)
        return kept

    async def write_group(self, group: Group) -> None:
        """Write the group's record (its generation and protocol) and the image of its
        members (a tombstone once it has none), in one append; raises a failed write."""
        await self._store.write_state(group.group_id, classic_image(group), ConsumerGroupRecord(
            group.generation, group.protocol_type, group.protocol_name,
            empty_since_ms=(group.empty_since_ms or 0) if group.state is _S.EMPTY else 0))

    async def delete_group(self, group_id: str) -> ErrorCode:
        """DeleteGroups of one group: only an empty one (NON_EMPTY_GROUP), with its offsets.

        The group is Dead while its tombstones are written (requests for it
        answer COORDINATOR_NOT_AVAILABLE), then forgotten; if the write fails
        it is Empty again and the error is answered.
        """
        error = self._table.group_id_error(group_id)
        if error is not ErrorCode.none:
            return error
        group = self._table.get(group_id)
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
        group = self._table.by_id()[group_id]
        empty_since_ms = group.empty_since_ms
        group.move(_S.DEAD)
        try:
            await self._store.delete_group(group_id)
        except BaseException:
            group.state = _S.EMPTY  # nothing changed for its members: there are none
            group.empty_since_ms = empty_since_ms
            raise
        self._table.remove(group)
        log.info("kafka group %s: deleted", group_id)
