"""TxnMarkers alone: markers in this broker's real segments, or through a routed writer."""

from __future__ import annotations

import pytest

from broker.api import Block, TopicConfig
from broker.segments.entry import EntryKind
from broker.topics.manager import TopicManager
from broker.txn._markers import TxnMarkers
from broker.txn.states import Txn, TxnState
from ledger.errors import BookieUnavailableError
from tests.unit.broker.conftest import BrokerEnv, block, read_all
from txnbuffer.api import TxnId

SEGMENTS = ("t/0", "t/1")


async def _transaction(topics: TopicManager, number: int) -> Txn:
    """A transaction with an entry in each segment, then a plain entry after it."""
    txn = Txn((0, number), TxnState.OPEN, 0, list(SEGMENTS))
    for index, name in enumerate(SEGMENTS):
        segment = await topics.segment(name)
        await segment.append([block(index)], "", -1, txn_id=txn.txn_id)
        await segment.append([Block(b"plain", 1)], f"w{index}-{number}", 0)
    return txn


@pytest.mark.parametrize("kind", [EntryKind.COMMIT_MARKER, EntryKind.ABORT_MARKER])
async def test_markers_in_this_brokers_segments(env: BrokerEnv, kind: EntryKind) -> None:
    topics = env.manager()
    await topics.create_topic("t", 2, TopicConfig())
    txn = await _transaction(topics, 1)
    markers = TxnMarkers(topics)
    assert not markers.routed
    for name in SEGMENTS:  # read_committed stops at the open transaction
        assert (await topics.segment(name)).committed_end == 0
    await markers.write(txn, kind)
    for index, name in enumerate(SEGMENTS):
        segment = await topics.segment(name)
        assert segment.committed_end == segment.end_offset == 2
        data = [b.data for b in await read_all(segment, 0)]
        committed = kind is EntryKind.COMMIT_MARKER
        assert data == ([block(index).data] if committed else []) + [b"plain"]


async def test_routed_markers_go_to_the_writer(env: BrokerEnv) -> None:
    topics = env.manager()
    await topics.create_topic("t", 2, TopicConfig())
    txn = await _transaction(topics, 1)
    sent: list[tuple[str, TxnId, EntryKind]] = []

    async def writer(name: str, txn_id: TxnId, kind: EntryKind) -> None:
        sent.append((name, txn_id, kind))

    markers = TxnMarkers(topics)
    markers.route(writer)
    assert markers.routed
    await markers.write(txn, EntryKind.COMMIT_MARKER)
    assert sorted(sent) == [(name, txn.txn_id, EntryKind.COMMIT_MARKER) for name in SEGMENTS]
    for name in SEGMENTS:  # nothing written here
        assert (await topics.segment(name)).committed_end == 0


@pytest.mark.faults
async def test_a_failed_marker_fails_the_write(topics: TopicManager) -> None:
    async def writer(name: str, _txn_id: TxnId, _kind: EntryKind) -> None:
        if name == "t/1":
            raise BookieUnavailableError("injected: marker not written")

    markers = TxnMarkers(topics, writer)
    assert markers.routed
    txn = Txn((0, 1), TxnState.ABORTING, 0, list(SEGMENTS))
    with pytest.raises(BookieUnavailableError):
        await markers.write(txn, EntryKind.ABORT_MARKER)
    await markers.write(Txn((0, 2), TxnState.ABORTING, 0, []), EntryKind.ABORT_MARKER)
