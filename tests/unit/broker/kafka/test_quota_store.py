"""Client quotas in a real (RocksDB) metadata store: shared by every broker, watched, unknowns.

Two ``QuotaStore`` on one store stand for two brokers of a cluster: a change
made through one reaches the other through the watch, also when the other's
first read after the watch fails (it reads again). AlterClientQuotas through
the handler: a lost answer of the store is REQUEST_TIMED_OUT and the retry
leaves the table as asked; ``validate_only`` writes nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode

from broker.kafka.context import KafkaContext
from broker.kafka.dispatch import Call
from broker.kafka.handlers.client_quotas import ALTER_KEY, handle_alter
from broker.kafka.messages import build, nested, request_class
from broker.kafka.producer_ids import ProducerIds
from broker.kafka.quotas.store import QuotaStore
from broker.kafka.quotas.table import CLIENT_ID, PRODUCER_BYTE_RATE, QuotaTable, check_entity
from broker.metadata_paths import QUOTAS_PATH
from ledger.metadata.rocksdb_store import RocksDBMetadataStore
from tests.support.faulty_metadata import Fault, FaultyMetadataStore
from tests.support.wait import wait_for_async

_APP = check_entity([(CLIENT_ID, "app")])


def _set(value: float) -> Any:
    def edit(table: QuotaTable) -> QuotaTable:
        return table.altered(_APP, {PRODUCER_BYTE_RATE: value})
    return edit


async def test_a_change_through_one_broker_reaches_the_other_through_the_watch(
        tmp_path: Path) -> None:
    store = RocksDBMetadataStore(tmp_path / "metadata")
    faulty = FaultyMetadataStore(store)
    first, second = QuotaStore(store), QuotaStore(faulty)
    try:
        await first.start()
        await second.start()
        await first.change(_set(1024.0))
        assert first.table.entries == {_APP: {PRODUCER_BYTE_RATE: 1024.0}}  # at once, here

        async def second_has(value: float) -> bool:
            return second.table.entries.get(_APP) == {PRODUCER_BYTE_RATE: value}

        await wait_for_async(lambda: second_has(1024.0), "the other broker reloads")
        # Its next read after the watch fails: it reads again and re-arms the watch.
        faulty.fail_reads(1, lambda path: path == QUOTAS_PATH)
        await first.change(_set(2048.0))
        await wait_for_async(lambda: second_has(2048.0), "the reload retried")
        assert faulty.failed_reads == [QUOTAS_PATH]
        await first.change(_set(4096.0))
        await wait_for_async(lambda: second_has(4096.0), "the watch re-armed")
    finally:
        await first.close()
        await second.close()
        await store.close()


def _alter_call(value: float, *, validate_only: bool = False) -> Call:
    cls = request_class(ALTER_KEY, 1)
    entry = build(nested(cls, "EntryData"), entity=(
        build(nested(cls, "EntityData"), entity_type=CLIENT_ID, entity_name="app"),),
        ops=(build(nested(cls, "OpData"), key=PRODUCER_BYTE_RATE, value=value,
                   remove=False),))
    return Call(ALTER_KEY, 1, 1, "test", build(cls, entries=(entry,),
                                               validate_only=validate_only))


async def test_a_lost_answer_is_a_retriable_timeout_and_the_retry_sets_the_same(
        tmp_path: Path) -> None:
    store = RocksDBMetadataStore(tmp_path / "metadata")
    faulty = FaultyMetadataStore(store)
    quotas = QuotaStore(faulty)
    context = KafkaContext(None, "127.0.0.1", ProducerIds(store),  # type: ignore[arg-type]  # no topics needed
                           quota_store=quotas)
    try:
        await quotas.start()
        answer = await handle_alter(context, _alter_call(100.0, validate_only=True))
        assert answer.entries[0].error_code is ErrorCode.none
        assert QuotaTable.decode((await store.get(QUOTAS_PATH)).data, 0).entries == {}
        fired = faulty.fail("set", lambda path: path == QUOTAS_PATH, Fault.LOST_ANSWER)
        answer = await handle_alter(context, _alter_call(100.0))
        assert fired == [QUOTAS_PATH]
        assert answer.entries[0].error_code is ErrorCode.request_timed_out
        answer = await handle_alter(context, _alter_call(100.0))  # the client's retry
        assert answer.entries[0].error_code is ErrorCode.none
        stored = QuotaTable.decode((await store.get(QUOTAS_PATH)).data, 0)
        assert stored.entries == {_APP: {PRODUCER_BYTE_RATE: 100.0}}
        assert quotas.table.entries == stored.entries
    finally:
        await quotas.close()
        await store.close()


async def test_start_tries_again_when_the_store_does_not_answer(tmp_path: Path) -> None:
    """A broker starting while ZooKeeper blinks: the create's answer lost (it was
    applied), then a read refused; the start waits it out and reads the table."""
    store = RocksDBMetadataStore(tmp_path / "metadata")
    first = QuotaStore(store)
    await first.start()
    await first.change(_set(512.0))
    faulty = FaultyMetadataStore(store)
    fresh = RocksDBMetadataStore(tmp_path / "fresh")
    lost = FaultyMetadataStore(fresh)
    fired = lost.fail("create", lambda path: path == QUOTAS_PATH, Fault.LOST_ANSWER)
    second, third = QuotaStore(faulty), QuotaStore(lost)
    try:
        faulty.fail_reads(2)
        await second.start()  # two reads unanswered, then the table
        assert second.table.entries == {_APP: {PRODUCER_BYTE_RATE: 512.0}}
        await third.start()  # its create applied, the answer lost: "exists" the next time
        assert fired == [QUOTAS_PATH]
        assert third.table.entries == {}
    finally:
        await first.close()
        await second.close()
        await third.close()
        await store.close()
        await fresh.close()
