"""TxnTable alone: transactions by id and label, closed labels, its writes to a real log."""

from __future__ import annotations

import json

import pytest

from broker.api import TopicConfig
from broker.errors import InternalTopicError, TxnLabelClosedError, TxnNotFoundError
from broker.system.compacted_topic import CompactedTopic
from broker.topics.manager import TopicManager
from broker.txn._table import TxnTable
from broker.txn.states import TXN_LOG_TOPIC, Txn, TxnState
from ledger.errors import BookieUnavailableError
from tests.unit.broker.conftest import BrokerEnv
from txnbuffer.txn_ids import txn_id_hex


def _txn(number: int, label: str = "", state: TxnState = TxnState.OPEN) -> Txn:
    return Txn((0, number), state, 1_000, label=label)


async def _logged(topics: TopicManager) -> dict[str, dict[str, object] | None]:
    """The log as a new reader sees it, each value decoded (None: a tombstone's absence)."""
    records = await CompactedTopic(topics, TXN_LOG_TOPIC, maintain=False).read_prefix("")
    return {key: json.loads(value) for key, value in records.items()}


async def test_transactions_by_id_and_label(topics: TopicManager) -> None:
    table = TxnTable(CompactedTopic(topics, TXN_LOG_TOPIC))
    first, second, other = _txn(2, "job"), _txn(1, "job"), _txn(3)
    for txn in (first, second, other):
        table.add(txn)
    assert table.get(first.txn_id) is first
    assert table.find((0, 9)) is None
    with pytest.raises(TxnNotFoundError):
        table.get((0, 9))
    assert table.labelled("job") == [second, first]  # by txn id
    assert table.labelled("none") == []
    assert {txn.txn_id for txn in table.transactions()} == {(0, n) for n in (1, 2, 3)}
    table.remove(first)
    table.remove(second)
    assert table.labelled("job") == []
    assert table.find(first.txn_id) is None
    table.clear()
    assert table.transactions() == []


async def test_closed_labels_until_forgotten(topics: TopicManager) -> None:
    table = TxnTable(CompactedTopic(topics, TXN_LOG_TOPIC))
    table.check_not_closed("job")  # open: nothing raised
    table.close_label("job", 100)
    table.close_label("job", 500)  # closed first at 100: kept
    assert table.is_closed("job")
    with pytest.raises(TxnLabelClosedError):
        table.check_not_closed("job")
    table.check_not_closed("")  # no label is never closed
    table.forget_closed_labels(99)
    assert table.is_closed("job")
    table.forget_closed_labels(100)
    assert not table.is_closed("job")
    table.check_not_closed("job")


async def test_writes_reach_the_log(topics: TopicManager) -> None:
    table = TxnTable(CompactedTopic(topics, TXN_LOG_TOPIC))
    txn = _txn(1, "job")
    await table.save(txn)
    await table.write("commit-x", b'{"format_version": 1, "v": 1, "state": "COMMITTING"}')
    logged = await _logged(topics)
    assert logged[txn.name] == json.loads(txn.record())
    assert logged["commit-x"] == {"format_version": 1, "v": 1, "state": "COMMITTING"}
    await table.write("commit-x", None)  # a tombstone
    assert "commit-x" not in await _logged(topics)


async def test_register_segment_logs_it_once(env: BrokerEnv) -> None:
    topics = env.manager()
    await topics.create_topic("t", 2, TopicConfig())
    table = TxnTable(CompactedTopic(topics, TXN_LOG_TOPIC))
    txn = _txn(1)
    table.add(txn)
    await table.register_segment(txn, "t/1")
    await table.register_segment(txn, "t/0")
    await table.register_segment(txn, "t/1")  # known: not again
    assert txn.segments == ["t/1", "t/0"]
    logged = (await _logged(topics))[txn.name]
    assert logged is not None and logged["segments"] == ["t/1", "t/0"]


async def test_register_segment_refuses_system_segments(topics: TopicManager) -> None:
    table = TxnTable(CompactedTopic(topics, TXN_LOG_TOPIC))
    txn = _txn(1)
    with pytest.raises(InternalTopicError):
        await table.register_segment(txn, f"{TXN_LOG_TOPIC}/0")
    assert txn.segments == []


@pytest.mark.faults
async def test_a_failed_registration_is_taken_back(topics: TopicManager) -> None:
    log = CompactedTopic(topics, TXN_LOG_TOPIC)
    table = TxnTable(log)
    txn = _txn(1)

    async def failing(_key: str, _value: bytes | None) -> None:
        raise BookieUnavailableError("injected: not written")

    log.write = failing  # type: ignore[method-assign, assignment]
    with pytest.raises(BookieUnavailableError):
        await table.register_segment(txn, "t/0")
    assert txn.segments == []  # the next append registers it again
    assert txn_id_hex(txn.txn_id) not in await _logged(topics)
