"""``GroupTable`` alone: groups by id, the group id rule, static members' fencing."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.kafka.consumer_groups._table import GroupTable
from broker.kafka.consumer_groups.members import Group, Member


def _member(member_id: str, instance: str | None = None) -> Member:
    return Member(member_id, "client", "", 10_000, 10_000, (("range", b""),), instance)


def test_a_group_id_must_be_given_and_fit() -> None:
    table = GroupTable(max_group_id_bytes=4)
    assert table.group_id_error("abcd") is ErrorCode.none
    assert table.group_id_error("") is ErrorCode.invalid_group_id
    assert table.group_id_error(None) is ErrorCode.invalid_group_id
    assert table.group_id_error("abcde") is ErrorCode.invalid_group_id
    assert table.group_id_error("é" * 3) is ErrorCode.invalid_group_id  # 6 bytes of UTF-8


def test_groups_are_added_once_and_removed_only_as_the_same_group() -> None:
    table = GroupTable(512)
    assert table.get("g") is None
    added = table.get_or_add("g")
    assert (added.group_id, added.generation) == ("g", 0)
    assert table.get_or_add("g") is added
    replacement = Group("g", generation=7)
    table.put(replacement)
    assert table.get("g") is replacement
    table.remove(added)  # no longer the table's group: left alone
    assert table.get("g") is replacement
    table.remove(replacement)
    assert table.get("g") is None
    table.put(Group("h"))
    assert list(table.by_id()) == ["h"]
    assert table.pop("h") is not None
    assert table.pop("h") is None
    assert table.by_id() == {}


def test_the_table_dict_is_live() -> None:
    table = GroupTable(512)
    table.by_id()["g"] = Group("g")  # as the report's reset adds a group
    assert table.get("g") is not None


def test_a_replaced_static_member_is_fenced() -> None:
    table = GroupTable(512)
    group = table.get_or_add("g")
    group.members["new"] = _member("new", "instance-a")
    group.members["dynamic"] = _member("dynamic")
    assert table.fenced("g", "old", "instance-a")
    assert not table.fenced("g", "new", "instance-a")
    assert not table.fenced("g", "old", None)  # a dynamic member is never fenced
    assert not table.fenced("g", "old", "instance-b")  # an unknown instance
    assert not table.fenced("other", "old", "instance-a")  # an unknown group
