"""Folio grants as Kafka ACL bindings and back, and the filters DescribeAcls and DeleteAcls use."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from broker.auth.permissions import AclTable, Action, Grant, ResourceKind
from broker.kafka.acl_bindings import (
    PATTERN_LITERAL,
    PATTERN_MATCH,
    PATTERN_PREFIXED,
    AclRefusedError,
    Binding,
    bindings_of,
    grant_of,
    matches,
)

TOPIC, GROUP, TXN = 2, 3, 5
READ, WRITE, ALTER, DELETE, ALL = 3, 4, 7, 6, 2


def _creation(**values: object) -> SimpleNamespace:
    base = {"resource_type": TOPIC, "resource_name": "orders", "resource_pattern_type":
            PATTERN_LITERAL, "principal": "User:app", "host": "*", "operation": READ,
            "permission_type": 3}
    return SimpleNamespace(**{**base, **values})


def _filter(**values: object) -> SimpleNamespace:
    base = {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
            "principal_filter": None, "host_filter": None, "operation": 1,
            "permission_type": 1}
    return SimpleNamespace(**{**base, **values})


def test_grants_become_one_binding_per_action_and_map_back() -> None:
    table = AclTable([
        Grant("app", ResourceKind.TOPIC, "orders.*", frozenset(Action)),
        Grant("app", ResourceKind.GROUP, "tx", frozenset({Action.PRODUCE, Action.CONSUME})),
        Grant("ops", ResourceKind.GROUP, "*", frozenset({Action.ADMIN}))])
    shown = {(b.principal, b.resource_type, b.resource_name, b.pattern_type, b.operation)
             for b in bindings_of(table)}
    assert shown == {
        ("User:app", TOPIC, "orders.", PATTERN_PREFIXED, READ),
        ("User:app", TOPIC, "orders.", PATTERN_PREFIXED, WRITE),
        ("User:app", TOPIC, "orders.", PATTERN_PREFIXED, ALTER),
        ("User:app", GROUP, "tx", PATTERN_LITERAL, READ),
        ("User:app", TXN, "tx", PATTERN_LITERAL, WRITE),
        ("User:ops", GROUP, "*", PATTERN_LITERAL, DELETE)}
    for binding in bindings_of(table):
        again = grant_of(_creation(resource_type=binding.resource_type,
                                   resource_name=binding.resource_name,
                                   resource_pattern_type=binding.pattern_type,
                                   principal=binding.principal, operation=binding.operation))
        assert again == [binding]
        assert any(g.role == binding.role and g.kind is binding.kind
                   and g.pattern == binding.pattern and binding.action in g.actions
                   for g in table.grants)


def test_all_is_every_action_of_the_resource_type() -> None:
    assert {b.action for b in grant_of(_creation(operation=ALL))} == set(Action)
    assert {b.action for b in grant_of(_creation(resource_type=GROUP, operation=ALL))} == {
        Action.CONSUME, Action.ADMIN}
    assert [b.kind for b in grant_of(_creation(resource_type=TXN, operation=ALL))] == [
        ResourceKind.GROUP]


@pytest.mark.parametrize(("values", "message"), [
    ({"permission_type": 2}, "only allow"),
    ({"host": "10.0.0.1"}, "host '*'"),
    ({"principal": "Group:x"}, "User:<role>"),
    ({"principal": "User:"}, "User:<role>"),
    ({"resource_type": 4}, "CLUSTER is not supported"),
    ({"resource_type": 7}, "USER is not supported"),
    ({"resource_pattern_type": PATTERN_MATCH}, "LITERAL or PREFIXED"),
    ({"resource_name": "a*"}, "nowhere else"),
    ({"resource_name": "*", "resource_pattern_type": PATTERN_PREFIXED}, "nowhere else"),
    ({"resource_name": ""}, "give a name"),
    ({"operation": 8}, "DESCRIBE on TOPIC has no Folio action"),
    ({"resource_type": GROUP, "operation": WRITE}, "use READ, DELETE or ALL"),
])
def test_what_a_grant_cannot_hold_is_refused(values: dict[str, object], message: str) -> None:
    with pytest.raises(AclRefusedError, match=message.replace("*", r"\*")):
        grant_of(_creation(**values))


def test_filters_match_as_kafka_describes_them() -> None:
    literal = Binding(TOPIC, "orders", PATTERN_LITERAL, "User:app", READ)
    prefixed = Binding(TOPIC, "ord", PATTERN_PREFIXED, "User:app", READ)
    wildcard = Binding(TOPIC, "*", PATTERN_LITERAL, "User:app", READ)
    everything = _filter()
    assert all(matches(b, everything) for b in (literal, prefixed, wildcard))
    named = _filter(resource_name_filter="orders", pattern_type_filter=PATTERN_MATCH)
    assert [matches(b, named) for b in (literal, prefixed, wildcard)] == [True, True, True]
    exact = _filter(resource_name_filter="orders", pattern_type_filter=PATTERN_LITERAL)
    assert [matches(b, exact) for b in (literal, prefixed, wildcard)] == [True, False, False]
    assert not matches(literal, _filter(permission_type=2))  # no DENY bindings exist
    assert not matches(literal, _filter(principal_filter="User:other"))
    assert not matches(literal, _filter(host_filter="10.0.0.1"))
    assert matches(literal, _filter(host_filter="*", operation=READ, resource_type_filter=TOPIC))
    assert not matches(literal, _filter(operation=WRITE))
