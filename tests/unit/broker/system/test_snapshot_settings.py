"""The transaction buffers' snapshot settings, from ``folio standalone`` down to a segment."""

from __future__ import annotations

import pytest

from broker.api import TopicConfig
from broker.standalone_config import StandaloneConfig
from broker.system.snapshot_store import TopicSnapshotStore
from broker.txn.coordinator import TxnCoordinator
from tests.unit.broker.conftest import BrokerEnv, block
from txnbuffer import SnapshotPolicy
from txnbuffer.snapshot import HEADER, ITEM_BYTES


def test_standalone_settings_make_the_policy() -> None:
    config = StandaloneConfig(txn_snapshot_every_changes=5, txn_snapshot_every_ms=100,
                              txn_snapshot_chunk_bytes=4096)
    assert config.txn_snapshots() == SnapshotPolicy(5, 100, 4096)
    assert StandaloneConfig().txn_snapshots() == SnapshotPolicy()


@pytest.mark.parametrize(("field", "value", "message"), [
    ("txn_snapshot_every_changes", 0, "every_changes and every_ms must be positive"),
    ("txn_snapshot_every_ms", -1, "every_changes and every_ms must be positive"),
    ("txn_snapshot_chunk_bytes", -1, "chunk_bytes >= 0"),
    ("txn_snapshot_chunk_bytes", 10, "cannot hold one abort"),
])
def test_bad_settings_are_refused_by_name(field: str, value: int, message: str) -> None:
    with pytest.raises(ValueError, match=message) as raised:
        StandaloneConfig(**{field: value})  # type: ignore[arg-type]
    assert "txn_snapshot_" in str(raised.value)


async def test_policy_reaches_each_segments_buffer(env: BrokerEnv) -> None:
    """One abort per chunk: 3 aborts make chunks -1, -2 and -end (the last chunk)."""
    policy = SnapshotPolicy(every_changes=1, chunk_bytes=HEADER.size + ITEM_BYTES)
    topics = env.manager(txn_snapshots=policy)
    await topics.create_topic("t", 1, TopicConfig())
    coordinator = TxnCoordinator(topics, clock=env.clock)
    await coordinator.start()
    segment = await topics.segment("t/0")
    for index in range(3):
        txn = await coordinator.begin(60_000)
        async with coordinator.writing(txn, "t/0"):
            await segment.append([block(index)], "", -1, txn_id=txn)
        await coordinator.abort(txn)
    await segment.tick(0)  # the maintenance round's snapshot
    store = topics.txn_snapshot_store()
    assert isinstance(store, TopicSnapshotStore)
    records = await store.topic.read_prefix("t/0-")
    assert sorted(records) == ["t/0-1", "t/0-2", "t/0-end"]
    await coordinator.close()
