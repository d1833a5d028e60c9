"""``GroupSummaries`` alone over a hand-filled ``GroupTable``: DescribeGroups and ListGroups."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.kafka.consumer_groups._listing import GroupSummaries, GroupSummary
from broker.kafka.consumer_groups._table import GroupTable
from broker.kafka.consumer_groups.members import Group, Member
from broker.kafka.consumer_groups.states import ConsumerGroupState

S = ConsumerGroupState


def _table() -> GroupTable:
    table = GroupTable(512)
    stable = Group("stable", S.STABLE, 3, "consumer", "range", "m1")
    stable.members["m1"] = Member("m1", "client-1", "/10.0.0.1", 10_000, 10_000,
                                  (("range", b"meta-r"), ("roundrobin", b"meta-rr")),
                                  "instance-1", b"assigned")
    joining = Group("joining", S.PREPARING_REBALANCE, 1, "connect", "sticky", "m2")
    joining.members["m2"] = Member("m2", "client-2", "", 10_000, 10_000,
                                   (("sticky", b"meta-s"),), None, b"old")
    for group in (stable, joining, Group("empty"), Group("dead", S.DEAD)):
        table.put(group)
    return table


def test_a_stable_group_is_described_with_metadata_and_assignments() -> None:
    error, summary = GroupSummaries(_table()).describe("stable")
    assert error is ErrorCode.none
    assert summary == GroupSummary("stable", S.STABLE, "consumer", "range", (
        ("m1", "instance-1", "client-1", "/10.0.0.1", b"meta-r", b"assigned"),))


def test_a_group_not_stable_is_described_without_metadata_or_assignments() -> None:
    error, summary = GroupSummaries(_table()).describe("joining")
    assert error is ErrorCode.none
    assert summary.members == (("m2", None, "client-2", "", b"", b""),)
    assert summary.state is S.PREPARING_REBALANCE


def test_an_unknown_group_is_dead_and_a_bad_id_an_error() -> None:
    listing = GroupSummaries(_table())
    assert listing.describe("nobody") == (ErrorCode.none,
                                          GroupSummary("nobody", S.DEAD, "", ""))
    assert listing.describe("") == (ErrorCode.invalid_group_id,
                                    GroupSummary("", S.DEAD, "", ""))


def test_groups_are_listed_by_id_without_the_dead_and_filtered() -> None:
    listing = GroupSummaries(_table())
    assert [s.group_id for s in listing.list_groups(None, None)] == [
        "empty", "joining", "stable"]
    assert [s.group_id for s in listing.list_groups({S.STABLE, S.EMPTY}, None)] == [
        "empty", "stable"]
    assert [s.group_id for s in listing.list_groups(None, {"connect"})] == ["joining"]
    assert [s.group_id for s in listing.list_groups(None, {""})] == ["empty"]
    assert listing.list_groups({S.DEAD}, None) == []
    assert listing.list_groups(None, None)[2] == GroupSummary("stable", S.STABLE, "consumer",
                                                              "range")
