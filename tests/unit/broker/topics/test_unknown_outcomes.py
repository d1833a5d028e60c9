"""Topic and reader-group records whose write lost its answer (issue 22): read back, go on.

``tests.support.faulty_metadata`` applies the write and raises
``MetadataUnavailableError``, or raises before applying. A write that landed
is not reported as failed (a retry would then meet TopicExists, a sealed
segment, a version conflict); one that did not land is retried or reported.
"""

from __future__ import annotations

import pytest

from broker.api import SegmentState, TopicConfig
from broker.groups.store import ReaderGroupStore
from broker.segments.names import topic_path
from broker.system.snapshot_store import snapshot_store
from broker.topics.manager import TopicManager
from folio.api.v1 import groups_pb2
from ledger.errors import MetadataUnavailableError
from tests.support.faulty_metadata import Fault, FaultyMetadataStore
from tests.unit.broker.conftest import BrokerEnv

pytestmark = pytest.mark.faults


def _manager(env: BrokerEnv, store: FaultyMetadataStore) -> TopicManager:
    return TopicManager(env.ledgers, store, txn_store_factory=snapshot_store, clock=env.clock)


async def test_create_topic_whose_answer_was_lost(env: BrokerEnv) -> None:
    store = FaultyMetadataStore(env.store)
    topics = _manager(env, store)
    try:
        fired = store.fail("create", topic_path("t").__eq__, Fault.LOST_ANSWER)
        info = await topics.create_topic("t", 2, TopicConfig())
        assert fired == [topic_path("t")]
        assert len(info.segments) == 2
        store.fail("create", topic_path("u").__eq__, Fault.BEFORE)
        with pytest.raises(MetadataUnavailableError):
            await topics.create_topic("u", 1, TopicConfig())
        assert (await topics.create_topic("u", 1, TopicConfig())).name == "u"  # retried
    finally:
        await topics.close()


@pytest.mark.parametrize("fault", list(Fault))
async def test_scale_and_config_whose_answer_was_lost(env: BrokerEnv, fault: Fault) -> None:
    store = FaultyMetadataStore(env.store)
    topics = _manager(env, store)
    try:
        await topics.create_topic("t", 1, TopicConfig())
        fired = store.fail("set", topic_path("t").__eq__, fault)
        outcome = await topics.scale_topic("t", ["t/0"], [(0.0, 0.5), (0.5, 1.0)])
        assert fired == [topic_path("t")]
        assert [r.key_low for r in outcome.created] == [0.0, 0.5]
        ranges = await topics.list_segments("t", include_sealed=True)
        assert [(r.number, r.state) for r in ranges] == [
            (0, SegmentState.SEALED), (1, SegmentState.OPEN), (2, SegmentState.OPEN)]
        store.fail("set", topic_path("t").__eq__, fault)
        updated = await topics.update_topic_config("t", {"retention_bytes": 4096})
        assert updated.config.retention_bytes == 4096
        assert (await topics.get_topic("t")).config.retention_bytes == 4096
    finally:
        await topics.close()


def _state(reader: str) -> groups_pb2.ReaderGroupState:
    return groups_pb2.ReaderGroupState(format=1, topics=["t"], session_timeout_ms=2000,
                                       readers=[groups_pb2.ReaderAssignment(reader_id=reader)])


async def test_reader_group_writes_whose_answer_was_lost(env: BrokerEnv) -> None:
    store = FaultyMetadataStore(env.store)
    groups = ReaderGroupStore(store)
    store.fail("create", lambda path: path.endswith("/g"), Fault.LOST_ANSWER)
    created = await groups.create("g", _state("a"))
    assert created.version == 0
    store.fail("set", lambda path: path.endswith("/g"), Fault.LOST_ANSWER)
    updated = await groups.update("g", 0, _state("b"))
    assert updated.version == 1
    assert (await groups.get("g")).state == _state("b")
    store.fail("set", lambda path: path.endswith("/g"), Fault.BEFORE)
    with pytest.raises(MetadataUnavailableError):
        await groups.update("g", 1, _state("c"))
    assert (await groups.update("g", 1, _state("c"))).version == 2  # retried
