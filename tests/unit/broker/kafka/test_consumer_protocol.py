"""The consumer protocol's coordinator (KIP-848) without a broker: assignors, reconciliation.

``ModernGroups`` over an in-memory group-record store and fixed partition
counts: members join and get a share; a partition moves to another member
only after its holder stopped reporting it (revocation before assignment);
epochs are fenced; leaving, session timeouts and revocation timeouts remove
members; a static member comes back under a new id with its partitions; the
classic side's groups are respected; commits and fetches check member epochs.
"""

from __future__ import annotations

import asyncio
import random

import pytest
from kio.schema.errors import ErrorCode

from broker.errors import TopicNotFoundError
from broker.kafka.consumer_groups.assignors import range_assign, uniform_assign
from broker.kafka.consumer_groups.modern import (
    HeartbeatRequest,
    HeartbeatResult,
    ModernConfig,
    ModernGroups,
)
from broker.kafka.consumer_groups.modern_members import ModernGroupState, Partitions
from broker.kafka.consumer_groups.offsets import ConsumerGroupRecord

TOPIC = "orders"


class Records:
    """Group records in memory (the ``GroupRecords`` an ``OffsetStore`` is)."""

    def __init__(self) -> None:
        self.records: dict[str, ConsumerGroupRecord] = {}

    def group_ids(self) -> set[str]:
        return set(self.records)

    def group_record(self, group_id: str) -> ConsumerGroupRecord | None:
        return self.records.get(group_id)

    def container_of(self, group_id: str) -> int:
        return 0

    async def write_group(self, group_id: str, record: ConsumerGroupRecord) -> None:
        self.records[group_id] = record

    async def delete_group(self, group_id: str) -> None:
        self.records.pop(group_id, None)


class Classic:
    """The classic side: ``busy`` groups have members."""

    def __init__(self) -> None:
        self.busy: set[str] = set()
        self.forgotten: list[str] = []

    def in_use(self, group_id: str) -> bool:
        return group_id in self.busy

    def forget_empty(self, group_id: str) -> None:
        self.forgotten.append(group_id)


async def _four(topic: str) -> int:
    if topic != TOPIC:
        raise TopicNotFoundError(topic)
    return 4


def _groups(records: Records | None = None, classic: Classic | None = None,
            config: ModernConfig | None = None) -> ModernGroups:
    return ModernGroups(_four, records or Records(), classic or Classic(), config)


def _beat(member: str, epoch: int, owned: Partitions | None = None,
          group: str = "g", **fields: object) -> HeartbeatRequest:
    if epoch == 0:
        fields.setdefault("subscribed", (TOPIC,))
        fields.setdefault("rebalance_timeout_ms", 30_000)
    return HeartbeatRequest(group_id=group, member_id=member, member_epoch=epoch,
                            owned=owned, **fields)  # type: ignore[arg-type]


def _held(result: HeartbeatResult) -> set[int]:
    assert result.error is ErrorCode.none, result
    assert result.assignment is not None
    return set(result.assignment.get(TOPIC, set()))


def _state(groups: ModernGroups) -> ModernGroupState:
    group = groups.group("g")
    assert group is not None
    return group.state


def test_uniform_is_balanced_and_sticky() -> None:
    subs = {m: frozenset({TOPIC}) for m in ("a", "b")}
    first = uniform_assign(subs, {TOPIC: 4}, {})
    assert sorted(len(first[m][TOPIC]) for m in subs) == [2, 2]
    three = {**subs, "c": frozenset({TOPIC})}
    second = uniform_assign(three, {TOPIC: 6}, first)
    assert sorted(len(second[m][TOPIC]) for m in three) == [2, 2, 2]
    for member in ("a", "b"):  # each kept what it had (4 partitions of 6 were held)
        assert first[member][TOPIC] <= second[member][TOPIC]
    # Different subscriptions: only subscribers get a topic's partitions.
    mixed = uniform_assign({"a": frozenset({TOPIC}), "b": frozenset({"other"})},
                           {TOPIC: 2, "other": 2}, {})
    assert mixed == {"a": {TOPIC: {0, 1}}, "b": {"other": {0, 1}}}


@pytest.mark.parametrize("seed", range(20))
def test_uniform_assigns_each_partition_once_to_a_subscriber_and_balances(seed: int) -> None:
    rng = random.Random(seed)
    topics = [f"t{i}" for i in range(rng.randint(1, 4))]
    counts = {t: rng.randint(0, 12) for t in topics}
    members = [f"m{i}" for i in range(rng.randint(1, 7))]
    same = rng.random() < 0.5
    subs = {m: frozenset(topics) if same else frozenset(rng.sample(topics, rng.randint(
        1, len(topics)))) for m in members}
    previous = uniform_assign({m: frozenset(topics) for m in members[:-1] or members},
                              counts, {})
    target = uniform_assign(subs, counts, previous)
    placed = [(t, p, m) for m, held in target.items() for t, ps in held.items() for p in ps]
    wanted = {(t, p) for t in topics for p in range(counts[t])
              if any(t in subs[m] for m in members)}
    assert sorted((t, p) for t, p, _ in placed) == sorted(wanted)  # each once
    assert all(t in subs[m] for t, _, m in placed)  # only to subscribers
    if same:
        loads = [sum(len(ps) for ps in target[m].values()) for m in members]
        assert max(loads) - min(loads) <= 1


def test_range_gives_contiguous_ranges() -> None:
    subs = {m: frozenset({TOPIC}) for m in ("b", "a", "c")}
    assert range_assign(subs, {TOPIC: 5}, {}) == {
        "a": {TOPIC: {0, 1}}, "b": {TOPIC: {2, 3}}, "c": {TOPIC: {4}}}


async def test_a_partition_moves_only_after_its_holder_revoked_it() -> None:
    records = Records()
    groups = _groups(records)
    a = await groups.heartbeat(_beat("a", 0, {}))
    assert (a.member_epoch, _held(a)) == (1, {0, 1, 2, 3})
    assert records.records["g"] == ConsumerGroupRecord(1, "consumer", "uniform", "consumer")
    b = await groups.heartbeat(_beat("b", 0, {}))
    assert b.member_epoch == 2 and _held(b) == set()  # nothing free yet
    assert _state(groups) is ModernGroupState.RECONCILING
    # a learns it must give up two partitions: it stays at epoch 1 meanwhile.
    a = await groups.heartbeat(_beat("a", 1, {TOPIC: {0, 1, 2, 3}}))
    kept = _held(a)
    assert a.member_epoch == 1 and len(kept) == 2
    b = await groups.heartbeat(_beat("b", 2, {}))
    assert b.assignment is None and b.member_epoch == 2  # still held by a
    # a reports them gone: it moves to epoch 2, and b gets them.
    a = await groups.heartbeat(_beat("a", 1, {TOPIC: kept}))
    assert a.member_epoch == 2
    b = await groups.heartbeat(_beat("b", 2, {}))
    assert _held(b) == {0, 1, 2, 3} - kept
    assert _state(groups) is ModernGroupState.STABLE
    # Commits and fetches check the member epoch.
    assert groups.commit_error("g", "a", 2, 9) is ErrorCode.none
    assert groups.commit_error("g", "a", 1, 9) is ErrorCode.stale_member_epoch
    assert groups.commit_error("g", "a", 2, 8) is ErrorCode.unsupported_version
    assert groups.commit_error("g", "x", 2, 9) is ErrorCode.unknown_member_id
    assert groups.commit_error("g", "", -1, 9) is ErrorCode.unknown_member_id  # not empty
    assert groups.fetch_error("g", None, -1) is ErrorCode.none
    assert groups.fetch_error("g", "b", 1) is ErrorCode.stale_member_epoch
    # b leaves: a gets everything at the next epoch.
    left = await groups.heartbeat(_beat("b", -1))
    assert left.member_epoch == -1
    a = await groups.heartbeat(_beat("a", 2, {TOPIC: kept}))
    assert (a.member_epoch, _held(a)) == (3, {0, 1, 2, 3})
    assert records.records["g"].generation == 3


async def test_epochs_are_fenced_and_a_lost_answer_is_forgiven() -> None:
    groups = _groups()
    await groups.heartbeat(_beat("a", 0, {}))
    await groups.heartbeat(_beat("b", 0, {}))
    a = await groups.heartbeat(_beat("a", 1, {TOPIC: {0, 1, 2, 3}}))
    kept = _held(a)
    await groups.heartbeat(_beat("a", 1, {TOPIC: kept}))  # now at epoch 2
    # The answer that bumped it was lost: epoch 1 again with a subset is fine.
    again = await groups.heartbeat(_beat("a", 1, {TOPIC: kept}))
    assert again.error is ErrorCode.none and again.member_epoch == 2
    ahead = await groups.heartbeat(_beat("a", 7, {TOPIC: kept}))
    assert ahead.error is ErrorCode.fenced_member_epoch
    stale = await groups.heartbeat(_beat("a", 1, {TOPIC: {0, 1, 2, 3}}))
    assert stale.error is ErrorCode.fenced_member_epoch
    unknown = await groups.heartbeat(_beat("zz", 2, {}))
    assert unknown.error is ErrorCode.unknown_member_id


async def test_bad_requests_and_the_other_kind() -> None:
    classic = Classic()
    classic.busy.add("old")
    groups = _groups(classic=classic)
    assert (await groups.heartbeat(_beat("a", 0, {}, group=""))).error \
        is ErrorCode.invalid_request
    assert (await groups.heartbeat(_beat("a", 0, {TOPIC: {1}}))).error \
        is ErrorCode.invalid_request
    assert (await groups.heartbeat(_beat("a", 0, {}, subscribed=()))).error \
        is ErrorCode.invalid_request
    assert (await groups.heartbeat(_beat("a", -3))).error is ErrorCode.invalid_request
    assert (await groups.heartbeat(_beat("a", 0, {}, server_assignor="sticky"))).error \
        is ErrorCode.unsupported_assignor
    assert (await groups.heartbeat(_beat("a", 0, {}, subscribed=(), regex="(ord"))).error \
        is ErrorCode.invalid_regular_expression
    assert (await groups.heartbeat(_beat("a", 0, {}, group="old"))).error \
        is ErrorCode.group_id_not_found
    assert (await groups.heartbeat(_beat("a", 4, {}, group="nothing"))).error \
        is ErrorCode.group_id_not_found
    joined = await groups.heartbeat(_beat("a", 0, {}, group="new", server_assignor="range"))
    assert _held(joined) == {0, 1, 2, 3}
    assert "new" in classic.forgotten  # an Empty classic group of that id is taken over
    assert groups.in_use("new")
    # A topic that does not exist has no partitions: nothing to assign.
    none = await groups.heartbeat(_beat("n", 0, {}, group="ghost", subscribed=("missing",)))
    assert _held(none) == set()


async def test_sessions_and_revocations_time_out() -> None:
    groups = _groups(config=ModernConfig(session_timeout_ms=200, heartbeat_interval_ms=50))
    await groups.heartbeat(_beat("a", 0, {}))
    await groups.heartbeat(_beat("b", 0, {}, rebalance_timeout_ms=100))
    group = groups.group("g")
    assert group is not None
    # b never heartbeats again: its session ends and a gets everything.
    deadline = asyncio.get_running_loop().time() + 5
    while "b" in group.members:
        a = await groups.heartbeat(_beat("a", group.members["a"].member_epoch,
                                         {TOPIC: {0, 1, 2, 3}}))
        assert a.error is ErrorCode.none
        assert asyncio.get_running_loop().time() < deadline, "b was not removed"
        await asyncio.sleep(0.02)
    # A member that keeps partitions it must revoke past its rebalance timeout goes too.
    c = await groups.heartbeat(_beat("c", 0, {}))
    assert _held(c) == set()
    slow = await groups.heartbeat(_beat("a", group.members["a"].member_epoch,
                                        {TOPIC: {0, 1, 2, 3}}, rebalance_timeout_ms=100))
    assert slow.error is ErrorCode.none
    while "a" in group.members:
        await groups.heartbeat(_beat("c", group.members["c"].member_epoch, {}))
        assert asyncio.get_running_loop().time() < deadline, "a was not removed"
        await asyncio.sleep(0.02)
    c = await groups.heartbeat(_beat("c", group.members["c"].member_epoch, {}))
    assert group.members["c"].assigned == {TOPIC: {0, 1, 2, 3}}
    groups.close()


async def test_a_static_member_comes_back_with_its_partitions() -> None:
    groups = _groups()
    first = await groups.heartbeat(_beat("s1", 0, {}, instance_id="box-1"))
    assert _held(first) == {0, 1, 2, 3}
    busy = await groups.heartbeat(_beat("s2", 0, {}, instance_id="box-1"))
    assert busy.error is ErrorCode.unreleased_instance_id
    gone = await groups.heartbeat(_beat("s1", -2, instance_id="box-1"))
    assert gone.member_epoch == -2
    back = await groups.heartbeat(_beat("s2", 0, {}, instance_id="box-1"))
    assert (back.member_epoch, _held(back)) == (1, {0, 1, 2, 3})  # no new epoch
    group = groups.group("g")
    assert group is not None and set(group.members) == {"s2"}
    groups.close()


async def test_restart_keeps_the_kind_and_the_epoch_not_the_members() -> None:
    records = Records()
    groups = _groups(records)
    await groups.heartbeat(_beat("a", 0, {}))
    groups.close()
    classic = Classic()
    again = _groups(records, classic)
    again.start()
    group = again.group("g")
    assert group is not None and group.group_epoch == 1 and not group.members
    assert classic.forgotten == ["g"]
    assert (await again.heartbeat(_beat("a", 1, {TOPIC: {0}}))).error \
        is ErrorCode.unknown_member_id
    rejoined = await again.heartbeat(_beat("a", 0, {}))
    assert rejoined.member_epoch == 2
    again.close()
    assert await again.delete_group("g") is ErrorCode.non_empty_group
    await again.heartbeat(_beat("a", -1))
    assert await again.delete_group("g") is ErrorCode.none
    assert "g" not in records.records and again.group("g") is None


@pytest.mark.parametrize("epoch", [0, 5])
async def test_a_leave_of_no_member_is_refused(epoch: int) -> None:
    groups = _groups()
    if epoch:
        await groups.heartbeat(_beat("a", 0, {}))
    answer = await groups.heartbeat(_beat("nobody", -1))
    assert answer.error is (ErrorCode.unknown_member_id if epoch
                            else ErrorCode.group_id_not_found)
    groups.close()
