"""Share group configs of a cluster in a real (RocksDB) metadata store: watched, unknowns read back.

Two ``WatchedGroupConfigs`` on one store stand for two brokers: a group's
configs written through one are in force on the other (through the watch),
and the share coordinator's settings of the group follow. A write whose
answer the store lost (applied) is read back and done; one refused before
it applied (the caller cannot tell: an unknown outcome) is read back, found
not applied, and raised; the retry applies it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.kafka.share_groups.group_configs import WatchedGroupConfigs
from broker.metadata_paths import SHARE_GROUP_CONFIGS_PATH
from ledger.errors import LedgerError
from ledger.metadata.rocksdb_store import RocksDBMetadataStore
from tests.support.faulty_metadata import Fault, FaultyMetadataStore
from tests.support.wait import wait_for_async

_LOCK = {"share.record.lock.duration.ms": "15000"}


async def test_configs_written_through_one_broker_reach_the_other(tmp_path: Path) -> None:
    store = RocksDBMetadataStore(tmp_path / "metadata")
    first, second = WatchedGroupConfigs(store), WatchedGroupConfigs(store)
    try:
        await first.start()
        await second.start()
        await first.write("g", _LOCK)
        assert first.of("g") == _LOCK  # at once, here

        async def second_has(configs: dict[str, str]) -> bool:
            return dict(second.of("g")) == configs

        await wait_for_async(lambda: second_has(_LOCK), "the other broker reloads")
        await second.write("g", {})  # deleted through the other one
        await wait_for_async(lambda: _empty(first), "the first broker reloads")
        assert second.of("other") == {}
    finally:
        await first.close()
        await second.close()
        await store.close()


async def _empty(configs: WatchedGroupConfigs) -> bool:
    return not configs.of("g")


async def test_an_unknown_outcome_is_read_back(tmp_path: Path) -> None:
    store = RocksDBMetadataStore(tmp_path / "metadata")
    faulty = FaultyMetadataStore(store)
    configs = WatchedGroupConfigs(faulty)
    try:
        await configs.start()
        fired = faulty.fail("set", lambda path: path == SHARE_GROUP_CONFIGS_PATH,
                            Fault.LOST_ANSWER)
        await configs.write("g", _LOCK)  # applied, answer lost: read back, done
        assert fired == [SHARE_GROUP_CONFIGS_PATH]
        assert configs.of("g") == _LOCK
        fired = faulty.fail("set", lambda path: path == SHARE_GROUP_CONFIGS_PATH,
                            Fault.BEFORE)
        changed = {"share.delivery.count.limit": "3"}
        with pytest.raises(LedgerError):
            await configs.write("g", changed)  # not applied: read back, raised
        assert fired == [SHARE_GROUP_CONFIGS_PATH]
        assert configs.of("g") == _LOCK
        await configs.write("g", changed)  # the client's retry
        assert configs.of("g") == changed
    finally:
        await configs.close()
        await store.close()
