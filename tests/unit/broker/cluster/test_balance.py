"""The container plan: shares, joins, leaves, and the container hash clients compute too."""

from __future__ import annotations

import zlib

import pytest

from broker.cluster.balance import Plan, plan, share
from broker.cluster.containers import OwnerRecord, container_of


def settle(members: list[str], owners: dict[int, str], count: int) -> dict[int, str]:
    """Let every member act on the plan until nobody moves; the final owners."""
    for _ in range(100):
        moved = False
        for member in members:
            moves = plan(member, members, owners, count)
            for container in moves.release:
                del owners[container]
                moved = True
            for container in moves.claim:
                if container not in owners:
                    owners[container] = member
                    moved = True
        if not moved:
            return owners
    raise AssertionError("the plan does not settle")


def test_shares_add_up_and_differ_by_at_most_one() -> None:
    members = ["b", "a", "c"]
    assert [share(m, members, 16) for m in ("a", "b", "c")] == [6, 5, 5]
    assert share("z", members, 16) == 0


def test_three_brokers_split_sixteen_containers_evenly() -> None:
    owners = settle(["a", "b", "c"], {}, 16)
    assert sorted(owners) == list(range(16))
    counts = sorted(list(owners.values()).count(m) for m in "abc")
    assert counts == [5, 5, 6]


def test_a_joining_broker_takes_only_its_share() -> None:
    before = settle(["a", "b", "c"], {}, 16)
    after = settle(["a", "b", "c", "d"], dict(before), 16)
    assert sorted(list(after.values()).count(m) for m in "abcd") == [4, 4, 4, 4]
    moved = [c for c in range(16) if before[c] != after[c]]
    assert len(moved) == 4 and all(after[c] == "d" for c in moved)


def test_a_leaving_broker_releases_everything_and_others_take_it() -> None:
    owners = settle(["a", "b", "c"], {}, 16)
    assert plan("c", ["a", "b"], owners, 16).release == tuple(
        sorted(c for c, o in owners.items() if o == "c"))
    after = settle(["a", "b"], {c: o for c, o in owners.items() if o != "c"}, 16)
    assert sorted(list(after.values()).count(m) for m in "ab") == [8, 8]


def test_a_broker_not_yet_a_member_claims_nothing() -> None:
    assert plan("d", ["a", "b"], {}, 4) == Plan()


def test_container_of_is_crc32_mod_count_and_stable() -> None:
    assert container_of("orders/3", 16) == zlib.crc32(b"orders/3") % 16
    assert container_of("orders/3", 16) == container_of("orders/3", 16)
    # The coordinator's topics share the container of _txnlog/0.
    assert container_of("_txncommitkeys/0", 16) == container_of("_txnlog/0", 16)
    # The snapshot topic's segment n is in container n (test_snapshots.py).
    assert container_of("_txnbuffer_snapshots/5", 16) == 5
    assert container_of("_txnbuffer_snapshots/0", 16) == 0
    with pytest.raises(ValueError, match="positive"):
        container_of("orders/3", 0)


def test_owner_record_round_trips_and_survives_garbage() -> None:
    record = OwnerRecord("b1", "127.0.0.1:7070", "abc")
    assert OwnerRecord.from_bytes(record.to_bytes()) == record
    assert OwnerRecord.from_bytes(b"\xff not json") == OwnerRecord("", "")
