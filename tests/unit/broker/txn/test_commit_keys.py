"""Commit keys: an unreadable record quarantines its key instead of risking a duplicate."""

from __future__ import annotations

import json
import logging

import pytest

from broker.errors import CorruptDataError
from broker.system.compacted_topic import CompactedTopic
from broker.txn.commit_keys import COMMIT_KEYS_TOPIC, CommitKeys
from broker.txn.coordinator import TxnCoordinator, TxnState
from tests.unit.broker.conftest import BrokerEnv


async def test_an_unreadable_record_quarantines_its_key_only(
    env: BrokerEnv, caplog: pytest.LogCaptureFixture,
) -> None:
    topics = env.manager()
    keys_log = CompactedTopic(topics, COMMIT_KEYS_TOPIC, maintain=False)
    await keys_log.write("good", json.dumps(
        {"v": 1, "sequence": 4, "txns": [], "done": True}).encode())
    await keys_log.write("bad", b"\xff\xfe not json")
    await keys_log.write("list", b"[1, 2]")
    coordinator = TxnCoordinator(topics, clock=env.clock)
    await coordinator.start()
    commit_keys = CommitKeys(topics, coordinator)
    try:
        with caplog.at_level(logging.ERROR):
            await commit_keys.start()
        for key, offset in (("bad", 1), ("list", 2)):
            assert (f"commit keys: the record of commit key {key!r} at offset {offset} of "
                    f"segment {COMMIT_KEYS_TOPIC}/0 is unreadable") in caplog.text
        refused = await coordinator.begin(10_000)
        with pytest.raises(CorruptDataError, match="commits under this key are refused"):
            await commit_keys.commit("bad", 0, [refused])
        assert coordinator.status(refused).state is TxnState.OPEN  # nothing was decided
        # The other keys work as ever: 4 was committed, 5 is new.
        duplicate = await coordinator.begin(10_000)
        assert await commit_keys.commit("good", 4, [duplicate]) is False
        assert coordinator.status(duplicate).state is TxnState.ABORTED
        assert await commit_keys.commit("good", 5, [refused]) is True
        assert coordinator.status(refused).state is TxnState.COMMITTED
    finally:
        await coordinator.close()
