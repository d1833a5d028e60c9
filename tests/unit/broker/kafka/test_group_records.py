"""``GroupRecords`` alone, on a real ledger stack (``BrokerEnv``): loading, records, deletion.

A failed write comes from a fault wrapper at the store's seam (a subclass of
``OffsetStore`` whose ``delete_group`` raises after or instead of writing).
"""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from broker.errors import BrokerShuttingDownError
from broker.kafka.consumer_groups._group_records import GroupRecords
from broker.kafka.consumer_groups._table import GroupTable
from broker.kafka.consumer_groups.members import Group, Member
from broker.kafka.consumer_groups.offsets import CommittedOffset, OffsetStore
from broker.kafka.consumer_groups.states import ConsumerGroupState
from broker.topics.manager import TopicManager

S = ConsumerGroupState


class FailingDeletes(OffsetStore):
    """Deletions fail (``BrokerError``) once ``fail`` is set, after writing when ``land``."""

    fail = False
    land = False

    async def delete_group(self, group_id: str) -> None:
        if self.fail and self.land:
            await super().delete_group(group_id)
        if self.fail:
            raise BrokerShuttingDownError("injected")
        await super().delete_group(group_id)


async def _loaded(topics: TopicManager) -> tuple[GroupRecords, GroupTable]:
    table = GroupTable(512)
    records = GroupRecords(OffsetStore(topics), table)
    await records.load()
    return records, table


async def test_groups_come_back_empty_at_their_recorded_generation(
        topics: TopicManager) -> None:
    records, table = await _loaded(topics)
    await records.write_group(Group("recorded", S.STABLE, 7, "consumer", "range", "m"))
    store = OffsetStore(topics)
    await store.commit("offsets-only", [(("t", 0), CommittedOffset(3))])
    _, table = await _loaded(topics)
    recorded, bare = table.get("recorded"), table.get("offsets-only")
    assert recorded is not None and bare is not None
    assert (recorded.state, recorded.generation, recorded.protocol_type) == (
        S.EMPTY, 7, "consumer")
    assert recorded.protocol_name is None and recorded.members == {}  # members are not kept
    assert (bare.state, bare.generation) == (S.EMPTY, 0)


async def test_delete_takes_only_a_known_empty_group(topics: TopicManager) -> None:
    records, table = await _loaded(topics)
    assert await records.delete_group("") is ErrorCode.invalid_group_id
    assert await records.delete_group("nobody") is ErrorCode.group_id_not_found
    busy = Group("busy", S.STABLE, 1)
    busy.members["m"] = Member("m", "client", "", 10_000, 10_000, (("range", b""),))
    table.put(busy)
    assert await records.delete_group("busy") is ErrorCode.non_empty_group
    joining = table.get_or_add("joining")
    joining.pending["p"] = None  # type: ignore[assignment]  # a member id given out
    assert await records.delete_group("joining") is ErrorCode.non_empty_group
    table.put(Group("dead", S.DEAD))
    assert await records.delete_group("dead") is ErrorCode.group_id_not_found


async def test_a_deleted_group_is_gone_with_its_offsets(topics: TopicManager) -> None:
    store = OffsetStore(topics)
    await store.commit("g", [(("t", 0), CommittedOffset(3))])
    records, table = await _loaded(topics)
    await records.write_group(Group("g", generation=2))
    assert await records.delete_group("g") is ErrorCode.none
    assert table.get("g") is None
    _, table = await _loaded(topics)
    assert table.get("g") is None
    again = OffsetStore(topics)
    await again.load()
    assert again.offsets("g") == {} and again.group_record("g") is None


@pytest.mark.parametrize("land", [False, True])
async def test_a_failed_deletion_leaves_the_group_empty_to_ask_again(
        topics: TopicManager, land: bool) -> None:
    store = FailingDeletes(topics)
    table = GroupTable(512)
    records = GroupRecords(store, table)
    await records.load()
    await store.commit("g", [(("t", 0), CommittedOffset(3))])
    table.put(Group("g", generation=2))
    store.fail, store.land = True, land
    assert await records.delete_group("g") is ErrorCode.coordinator_not_available
    group = table.get("g")
    assert group is not None and group.state is S.EMPTY
    with pytest.raises(BrokerShuttingDownError):
        await records.delete_empty("g")
    store.fail = False
    assert await records.delete_group("g") is ErrorCode.none  # asked again: tombstones again
    assert table.get("g") is None
