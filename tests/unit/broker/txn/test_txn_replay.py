"""TxnReplay alone: the table rebuilt from a real log, decided transactions finished.

The log is written by one ``TxnTable`` (as a coordinator before a crash
would have left it), then replayed by fresh parts on the same topics.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging

import pytest

from broker.api import TopicConfig
from broker.segments.entry import EntryKind
from broker.system.compacted_topic import CompactedTopic
from broker.topics.manager import TopicManager
from broker.txn._finish import TxnFinisher
from broker.txn._markers import MarkerWriter, TxnMarkers
from broker.txn._replay import TxnReplay
from broker.txn._table import TxnTable
from broker.txn._tasks import BackgroundTasks
from broker.txn._timeouts import TxnTimeouts
from broker.txn.states import GROUP_PREFIX, LOG_FORMAT_VERSION, TXN_LOG_TOPIC, Txn, TxnState
from ledger.records import dump_record
from tests.unit.broker.conftest import BrokerEnv, block
from txnbuffer.api import TxnId
from txnbuffer.txn_ids import txn_id_hex


class Replayed:
    """Fresh parts, as a coordinator builds them, with the replay under test."""

    def __init__(self, topics: TopicManager, env: BrokerEnv,
                 writer: MarkerWriter | None = None) -> None:
        self.log = CompactedTopic(topics, TXN_LOG_TOPIC)
        self.table = TxnTable(self.log)
        self.tasks = BackgroundTasks()
        markers = TxnMarkers(topics, writer)
        self.finisher = TxnFinisher(self.table, markers, self.tasks, clock=env.clock)
        timeouts = TxnTimeouts(self.table, self.finisher, self.tasks, clock=env.clock)
        self.replay = TxnReplay(self.log, self.table, self.finisher, timeouts, markers,
                                self.tasks)

    def state(self, number: int) -> TxnState | None:
        txn = self.table.find((0, number))
        return None if txn is None else txn.state


async def _before_the_crash(topics: TopicManager, states: dict[int, TxnState],
                            segments: dict[int, list[str]]) -> TxnTable:
    """Log a transaction of each state (with an entry in its segments), as a crash left them."""
    table = TxnTable(CompactedTopic(topics, TXN_LOG_TOPIC, maintain=False))
    for number, state in states.items():
        txn = Txn((0, number), state, 10**15, segments.get(number, []))
        for name in txn.segments:
            await (await topics.segment(name)).append([block(number)], "", -1,
                                                      txn_id=txn.txn_id)
        await table.save(txn)
    return table


def _group(*numbers: int) -> bytes:
    return dump_record(LOG_FORMAT_VERSION, {
        "state": "COMMITTING", "txns": [txn_id_hex((0, n)) for n in numbers]}, legacy_key="v")


async def _logged(topics: TopicManager) -> dict[str, str]:
    """Each readable record's state as a new reader of the log sees it."""
    records = await CompactedTopic(topics, TXN_LOG_TOPIC, maintain=False).read_prefix("")
    states: dict[str, str] = {}
    for key, value in records.items():
        with contextlib.suppress(ValueError):
            states[key] = json.loads(value).get("state", "")
    return states


async def test_replay_rebuilds_the_table_and_finishes_decisions(
        env: BrokerEnv, caplog: pytest.LogCaptureFixture) -> None:
    topics = env.manager()
    await topics.create_topic("t", 2, TopicConfig())
    old = await _before_the_crash(topics, {
        1: TxnState.OPEN, 2: TxnState.COMMITTING, 3: TxnState.COMMITTED,
        4: TxnState.COMMITTING, 5: TxnState.ABORTING, 6: TxnState.ABORTED,
    }, {2: ["t/0"], 5: ["t/1"]})
    group_key = GROUP_PREFIX + txn_id_hex((0, 2))
    await old.write(group_key, _group(2, 3))  # 3 finished before the crash
    await old.write(txn_id_hex((0, 7)), b"not json")
    replayed = Replayed(topics, env)
    with caplog.at_level(logging.ERROR, logger="broker.txn._replay"):
        await replayed.replay.start()
    assert "skipped the unreadable record" in caplog.text
    assert [replayed.state(n) for n in range(1, 8)] == [
        TxnState.OPEN, TxnState.COMMITTED, TxnState.COMMITTED, TxnState.COMMITTED,
        TxnState.ABORTED, TxnState.ABORTED, None]
    opened = replayed.table.find((0, 1))
    assert opened is not None and opened.timer is not None  # timed again
    assert [(await topics.segment(name)).committed_end for name in ("t/0", "t/1")] == [1, 1]
    logged = await _logged(topics)
    assert group_key not in logged
    assert {logged[txn_id_hex((0, n))] for n in (2, 4)} == {"COMMITTED"}
    assert logged[txn_id_hex((0, 5))] == "ABORTED"
    assert len(replayed.tasks) == 0  # standalone: driven before ``start`` returned
    replayed.finisher.clear()
    opened.cancel_timer()


async def test_replay_in_a_cluster_drives_markers_in_the_background(env: BrokerEnv) -> None:
    topics = env.manager()
    await topics.create_topic("t", 2, TopicConfig())
    await _before_the_crash(topics, {1: TxnState.COMMITTING}, {1: ["t/0", "t/1"]})
    owner_known = asyncio.Event()
    sent: list[str] = []

    async def writer(name: str, txn_id: TxnId, kind: EntryKind) -> None:
        await owner_known.wait()  # the segments' owners are not known yet
        sent.append(name)
        await (await topics.segment(name)).write_marker(kind, txn_id)

    replayed = Replayed(topics, env, writer)
    await replayed.replay.start()  # returns: a marker that waits keeps nothing from serving
    assert replayed.state(1) is TxnState.COMMITTING
    assert replayed.finisher.is_finishing((0, 1))
    assert len(replayed.tasks) == 1
    owner_known.set()
    await asyncio.wait_for(replayed.tasks.wait(), timeout=30)
    assert sorted(sent) == ["t/0", "t/1"]
    assert replayed.state(1) is TxnState.COMMITTED
    assert (await _logged(topics))[txn_id_hex((0, 1))] == "COMMITTED"
