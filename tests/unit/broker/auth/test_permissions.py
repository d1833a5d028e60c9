"""The grant model: names and prefixes, merging and revoking, the stored form."""

from __future__ import annotations

import pytest

from broker.auth.permissions import AclTable, Action, Grant, ResourceKind, check_pattern
from broker.errors import InvalidArgumentError

_T = ResourceKind.TOPIC
_P, _C, _A = Action.PRODUCE, Action.CONSUME, Action.ADMIN


def test_exact_names_prefixes_and_everything() -> None:
    table = AclTable([Grant("app", _T, "orders.*", frozenset({_P})),
                      Grant("app", _T, "audit", frozenset({_C})),
                      Grant("ops", _T, "*", frozenset({_A}))])
    assert table.allows("app", _T, "orders.eu", _P)
    assert not table.allows("app", _T, "orders", _P)  # the prefix is "orders."
    assert not table.allows("app", _T, "orders.eu", _C)
    assert table.allows("app", _T, "audit", _C) and not table.allows("app", _T, "audit2", _C)
    assert not table.allows("app", ResourceKind.GROUP, "audit", _C)
    assert table.allows("ops", _T, "anything", _A) and not table.allows("nobody", _T, "x", _A)
    assert table.allows_any("app", _T, "orders.x") and not table.allows_any("app", _T, "x")
    assert table.covers("app", _T, "orders.eu.*", _P) and not table.covers("app", _T, "*", _P)
    assert table.covers("ops", _T, "*", _A)


def test_grant_merges_and_revoke_removes() -> None:
    table = AclTable().with_grant(Grant("app", _T, "t", frozenset({_P})))
    table = table.with_grant(Grant("app", _T, "t", frozenset({_C})))
    assert table.grants == (Grant("app", _T, "t", frozenset({_P, _C})),)
    table = table.without("app", _T, "t", frozenset({_P}))
    assert table.grants == (Grant("app", _T, "t", frozenset({_C})),)
    assert table.without("app", _T, "t", frozenset({_C})).grants == ()


def test_stored_form_round_trips_and_carries_its_version() -> None:
    table = AclTable([Grant("b", _T, "x.*", frozenset({_P, _A})),
                      Grant("a", ResourceKind.GROUP, "g", frozenset({_C}))])
    decoded = AclTable.decode(table.encode(), 7)
    assert set(decoded.grants) == set(table.grants) and decoded.version == 7
    assert AclTable.decode(b"", 0).grants == ()
    with pytest.raises(ValueError, match="format 2"):
        AclTable.decode(b'{"version": 2, "grants": []}', 1)


@pytest.mark.parametrize("pattern", ["", "a*b", "*x", "x" * 257])
def test_bad_patterns_are_refused(pattern: str) -> None:
    with pytest.raises(InvalidArgumentError):
        check_pattern(pattern)
