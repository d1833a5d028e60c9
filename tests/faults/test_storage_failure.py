"""The in-process bookie's disk fails under a running broker, then heals: no restart needed.

A fault-injecting store (``tests/support/faulty_kv.py``) makes every RocksDB
write fail as a full disk does. Writes must then fail with that error
(UNAVAILABLE, the OS/RocksDB text, not a word about fencing), health must
turn NOT_SERVING and ``folio_storage_errors_total`` count it; once writes
succeed again the broker must serve again by itself, and every event
acknowledged before, during and after is read back once, in order.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from prometheus_client import REGISTRY

from broker.app.storage_watch import StorageWatch
from broker.services.server import SERVICE_NAMES, BrokerServer, start_broker_server
from broker.system.snapshot_store import snapshot_store
from broker.topics.manager import TopicManager
from folio.api.v1 import (
    admin_pb2,
    admin_pb2_grpc,
    append_pb2,
    append_pb2_grpc,
    read_pb2,
    read_pb2_grpc,
)
from folio.api.v1.block import decode_block
from ledger.bookie.bookie import Bookie
from ledger.client.directory import BookieDirectory
from ledger.client.ledger_client import LedgerClient
from ledger.config import BookieConfig, Durability, Journal, LedgerConfig
from ledger.metadata.rocksdb_store import RocksDBMetadataStore
from tests.support.faulty_kv import DISK_FULL, FaultyKV
from tests.support.wait import wait_for_async

pytestmark = pytest.mark.faults


@dataclass
class _Broker:
    faults: FaultyKV
    server: BrokerServer
    channel: grpc.aio.Channel


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[_Broker]:
    faults = FaultyKV()
    store = RocksDBMetadataStore(str(tmp_path / "metadata"))
    # RocksDB's own synced WAL: these tests fail its writes and watch the probes
    # reopen it (with the journal, a failed background write needs a restart).
    bookie = Bookie(BookieConfig(data_dir=str(tmp_path / "bookie"), durability=Durability.SYNC,
                                 journal=Journal.NONE),
                    open_kv=faults.open)
    directory = BookieDirectory([bookie])
    ledgers = LedgerClient(store, directory, LedgerConfig())
    topics = TopicManager(ledgers, store, txn_store_factory=snapshot_store)
    await topics.start()
    server = await start_broker_server(topics)
    watch = StorageWatch(bookie, server.health, SERVICE_NAMES, directory, interval_s=0.05)
    watch.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{server.port}")
    try:
        yield _Broker(faults, server, channel)
    finally:
        faults.heal()
        await channel.close(None)
        await watch.close()
        await server.stop(0)
        await topics.close()
        await ledgers.close()
        bookie.shutdown()
        await store.close()


async def _health(channel: grpc.aio.Channel) -> int:
    answer = await health_pb2_grpc.HealthStub(channel).Check(
        health_pb2.HealthCheckRequest(service="folio.v1.Produce"), timeout=10)
    return int(answer.status)


def _sample(name: str) -> float:
    return REGISTRY.get_sample_value(name) or 0.0


async def test_a_full_disk_is_reported_then_recovered_without_restart(broker: _Broker) -> None:
    admin = admin_pb2_grpc.AdminStub(broker.channel)
    produce = append_pb2_grpc.ProduceStub(broker.channel)
    await admin.CreateTopic(admin_pb2.CreateTopicRequest(name="disk"), timeout=30)

    async def write(payload: bytes) -> None:
        await produce.Produce(append_pb2.ProduceRequest(
            topic="disk", events=[append_pb2.ProduceEvent(payload=payload)]), timeout=30)

    acknowledged = []
    for n in range(5):
        await write(b"before-%d" % n)
        acknowledged.append(b"before-%d" % n)
    errors_before = _sample("folio_storage_errors_total")

    broker.faults.fail_now()
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await write(b"lost")
    assert raised.value.code() is grpc.StatusCode.UNAVAILABLE
    assert "No space left on device" in (raised.value.details() or "")
    assert "fenc" not in (raised.value.details() or "")
    await wait_for_async(lambda: _is(broker.channel, health_pb2.HealthCheckResponse.NOT_SERVING),
                      "health NOT_SERVING")
    assert _sample("folio_storage_errors_total") > errors_before
    assert _sample("folio_storage_failed") == 1
    # Still failing: every write says why, promptly.
    with pytest.raises(grpc.aio.AioRpcError) as again:
        await write(b"lost-too")
    assert again.value.code() is grpc.StatusCode.UNAVAILABLE
    assert DISK_FULL.split(":")[1].strip() in (again.value.details() or "")

    # Reads of what was written still work meanwhile.
    assert await _read_all(broker.channel, "disk/0") == acknowledged
    broker.faults.heal()
    await wait_for_async(lambda: _is(broker.channel, health_pb2.HealthCheckResponse.SERVING),
                      "health SERVING again")
    assert _sample("folio_storage_failed") == 0

    async def writes_again() -> bool:
        try:
            await write(b"after-0")
        except grpc.aio.AioRpcError:
            return False
        return True

    await wait_for_async(writes_again, "a write after the disk healed")
    acknowledged.append(b"after-0")
    for n in range(1, 5):
        await write(b"after-%d" % n)
        acknowledged.append(b"after-%d" % n)
    assert await _read_all(broker.channel, "disk/0") == acknowledged


async def _is(channel: grpc.aio.Channel, status: int) -> bool:
    return await _health(channel) == status


async def _read_all(channel: grpc.aio.Channel, segment: str) -> list[bytes]:
    info = await admin_pb2_grpc.AdminStub(channel).GetSegmentInfo(
        admin_pb2.GetSegmentInfoRequest(segment=segment), timeout=30)
    end = info.segment.end_offset
    payloads: list[bytes] = []
    call = read_pb2_grpc.ReadStub(channel).Read(
        read_pb2.ReadRequest(segment=segment, offset=0, max_wait_ms=100), timeout=30)
    async for response in call:
        for block in response.blocks:
            payloads.extend(decode_block(block.data).payloads)
        if len(payloads) >= end:
            call.cancel()
            break
    return payloads
