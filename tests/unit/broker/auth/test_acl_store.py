"""Grants in a real (RocksDB) metadata store: shared by every broker of the store, watched."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.auth.acl_store import ACL_PATH, AclStore
from broker.auth.permissions import Action, Grant, ResourceKind
from broker.errors import InvalidArgumentError
from ledger.metadata.rocksdb_store import RocksDBMetadataStore
from tests.support.wait import wait_for_async

_T = ResourceKind.TOPIC


async def test_a_grant_by_one_broker_reaches_the_other_through_the_watch(
        tmp_path: Path) -> None:
    store = RocksDBMetadataStore(tmp_path / "metadata")
    first, second = AclStore(store), AclStore(store)
    try:
        await first.start()
        await second.start()
        await first.grant(Grant("app", _T, "orders.*", frozenset({Action.PRODUCE})))
        assert first.table.allows("app", _T, "orders.eu", Action.PRODUCE)  # at once, here

        async def second_sees_it() -> bool:
            return second.table.allows("app", _T, "orders.eu", Action.PRODUCE)

        await wait_for_async(second_sees_it, "the other broker reloads the grants")
        await second.revoke("app", _T, "orders.*", frozenset({Action.PRODUCE}))

        async def first_sees_the_revoke() -> bool:
            return not first.table.allows_any("app", _T, "orders.eu")

        await wait_for_async(first_sees_the_revoke, "the revoke reaches the first broker")
        stored = await store.get(ACL_PATH)
        assert b'"version":1' in stored.data
    finally:
        await first.close()
        await second.close()
        await store.close()


async def test_bad_grants_are_refused(tmp_path: Path) -> None:
    store = RocksDBMetadataStore(tmp_path / "metadata")
    acls = AclStore(store)
    try:
        await acls.start()
        with pytest.raises(InvalidArgumentError, match="not a pattern"):
            await acls.grant(Grant("a*", _T, "t", frozenset({Action.CONSUME})))
        with pytest.raises(InvalidArgumentError, match="at least one action"):
            await acls.grant(Grant("a", _T, "t", frozenset()))
        with pytest.raises(InvalidArgumentError, match="only end a prefix"):
            await acls.grant(Grant("a", _T, "o*s", frozenset({Action.CONSUME})))
    finally:
        await acls.close()
        await store.close()
