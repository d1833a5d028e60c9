"""The transport-neutral check both front ends ask: needs, patterns, super-users."""

from __future__ import annotations

from broker.auth.access import Access, Need
from broker.auth.permissions import AclTable, Action, Grant, ResourceKind


class _Grants:
    """The grants, given (no store): what ``Access`` reads."""

    def __init__(self, *grants: Grant) -> None:
        self.table = AclTable(grants)

    async def grant(self, grant: Grant) -> AclTable:
        raise NotImplementedError

    async def revoke(self, role: str, kind: ResourceKind, pattern: str,
                     actions: frozenset[Action]) -> AclTable:
        raise NotImplementedError


TOPIC, GROUP = ResourceKind.TOPIC, ResourceKind.GROUP


def test_each_need_on_names_and_patterns() -> None:
    access = Access(_Grants(Grant("app", TOPIC, "orders.*", frozenset({Action.PRODUCE})),
                            Grant("app", GROUP, "tx", frozenset({Action.PRODUCE}))),
                    super_users={"root"})
    assert access.allows("app", Need.PRODUCE, TOPIC, "orders.eu")
    assert access.allows("app", Need.LOOKUP, TOPIC, "orders.eu")
    assert access.allows("app", Need.PRODUCE, TOPIC, "orders.eu.*")  # covered prefix
    assert access.allows("app", Need.AUTHENTICATED, TOPIC, "anything")
    assert access.denial("app", Need.CONSUME, TOPIC, "orders.eu") == (
        "role 'app' lacks consume permission on topic 'orders.eu'")
    assert access.denial("app", Need.PRODUCE, TOPIC, "*") is not None  # wider than granted
    assert "has no permission on topic 'billing'" in (
        access.denial("app", Need.LOOKUP, TOPIC, "billing") or "")
    assert access.denial("app", Need.SUPER_USER, TOPIC, "") == "role 'app' is not a super-user"
    assert access.allows("app", Need.PRODUCE, GROUP, "tx")
    assert not access.allows("app", Need.CONSUME, GROUP, "tx")
    for need in Need:
        assert access.allows("root", need, GROUP, "x")


def test_has_any_is_a_grant_of_the_action_on_some_resource_of_the_kind() -> None:
    access = Access(_Grants(Grant("app", TOPIC, "a", frozenset({Action.CONSUME})),
                            Grant("app", GROUP, "g", frozenset({Action.PRODUCE}))),
                    super_users={"root"})
    assert not access.has_any("app", TOPIC, Action.PRODUCE)
    assert access.has_any("app", GROUP, Action.PRODUCE)
    assert access.has_any("root", TOPIC, Action.PRODUCE)
    assert not access.has_any("nobody", TOPIC, Action.CONSUME)


def test_answers_follow_the_grants_when_they_change() -> None:
    grants = _Grants()
    access = Access(grants)
    assert not access.allows("app", Need.CONSUME, TOPIC, "orders")
    grants.table = AclTable([Grant("app", TOPIC, "orders", frozenset({Action.CONSUME}))])
    assert access.allows("app", Need.CONSUME, TOPIC, "orders")
    grants.table = AclTable()
    assert not access.allows("app", Need.CONSUME, TOPIC, "orders")
    long_name = "o" * 100_000  # checked, never kept
    assert not access.allows("app", Need.CONSUME, TOPIC, long_name)
    assert all(len(key[3]) < 1024 for key in access._answers)
