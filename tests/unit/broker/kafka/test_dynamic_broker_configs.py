"""Kafka's dynamic broker configs: the keys' checks, precedence and sources, AlterConfigs, limits.

A real (RocksDB) metadata store; two ``DynamicBrokerConfigs`` on one store
stand for two brokers of a cluster (node ids 1 and 2). AlterConfigs and
IncrementalAlterConfigs go through the handlers, as a client's would.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from prometheus_client import REGISTRY

from broker.kafka.config_docs import config_doc
from broker.kafka.context import KafkaContext
from broker.kafka.dispatch import Call
from broker.kafka.dynamic_configs import (
    DYNAMIC_BROKER_CONFIG,
    DYNAMIC_DEFAULT_BROKER_CONFIG,
    DynamicBrokerConfigs,
    DynamicConfigTable,
    InvalidConfigError,
    NotDynamicError,
    StaticConnectionSettings,
    check_config,
    described,
    resolved,
)
from broker.kafka.handlers.alter_configs import (
    ALTER_CONFIGS_KEY,
    INCREMENTAL_ALTER_CONFIGS_KEY,
    handle_alter_configs,
    handle_incremental_alter_configs,
)
from broker.kafka.messages import build, nested, request_class
from broker.kafka.producer_ids import ProducerIds
from broker.kafka.quotas.connections import ConnectionQuotas
from broker.kafka.quotas.limits import UNLIMITED, ConnectionLimits, ListenerLimits
from broker.kafka.quotas.table import QuotaTable
from broker.kafka.topic_configs import DEFAULT_CONFIG, STATIC_BROKER_CONFIG
from broker.metadata_paths import BROKER_CONFIGS_PATH
from ledger.metadata.rocksdb_store import RocksDBMetadataStore
from tests.support.wait import wait_for_async

_STATIC = StaticConnectionSettings(max_connections=500)
_SET, _DELETE, _APPEND = 0, 1, 2


def test_only_the_dynamic_keys_with_values_of_their_type_and_range_are_taken() -> None:
    assert check_config("max.connections", " 10") == ("max.connections", "10")
    assert check_config("listener.name.PLAIN.max.connections", "0") == (
        "listener.name.plain.max.connections", "0")
    assert check_config("max.connections.per.ip.overrides", "127.0.0.1:3, ::1:0") == (
        "max.connections.per.ip.overrides", "127.0.0.1:3,::1:0")
    for name in ("log.retention.ms", "listener.name.a.b.max.connections",
                 "listener.name.plain.ssl.keystore.location", "max.connection.creation.rates"):
        with pytest.raises(NotDynamicError, match="cannot update"):
            check_config(name, "1")
    for name, value, reason in [
            ("max.connections", "ten", "not a number of type INT"),
            ("max.connection.creation.rate", "-1", "at least 0"),
            ("max.connections.per.ip", str(2**31), "at most 2147483647"),
            ("max.connections.per.ip.overrides", "localhost:3", "'localhost:3' is not")]:
        with pytest.raises(InvalidConfigError, match=reason):
            check_config(name, value)


def test_a_brokers_value_wins_over_the_default_over_the_flag_over_the_built_in() -> None:
    table = DynamicConfigTable({"": {"max.connections": "300", "max.connections.per.ip": "9"},
                                "1": {"max.connections": "100",
                                      "listener.name.plain.max.connections": "2"}})
    one, two = resolved(table, 1, _STATIC), resolved(table, 2, _STATIC)
    assert (one["max.connections"], two["max.connections"]) == ("100", "300")
    assert one["max.connections.per.ip"] == two["max.connections.per.ip"] == "9"
    assert one["max.connection.creation.rate"] == str(UNLIMITED)
    assert "listener.name.plain.max.connections" not in two
    # Kafka's sources and synonyms, the value in force first.
    entries = {entry.name: entry for entry in described(table, 1, _STATIC)}
    connections = entries["max.connections"]
    assert (connections.value, connections.source) == ("100", DYNAMIC_BROKER_CONFIG)
    assert [(each.value, each.source) for each in connections.synonyms] == [
        ("100", DYNAMIC_BROKER_CONFIG), ("300", DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("500", STATIC_BROKER_CONFIG), (str(UNLIMITED), DEFAULT_CONFIG)]
    assert entries["max.connections.per.ip"].source == DYNAMIC_DEFAULT_BROKER_CONFIG
    rate = entries["max.connection.creation.rate"]
    assert (rate.source, len(rate.synonyms)) == (DEFAULT_CONFIG, 1)
    listener = entries["listener.name.plain.max.connections"]
    assert [(each.value, each.source) for each in listener.synonyms] == [
        ("2", DYNAMIC_BROKER_CONFIG)]
    assert not any(entry.read_only for entry in entries.values())
    assert all(config_doc(name) for name in entries)  # include_documentation answers each
    two_entries = {entry.name: entry for entry in described(table, 2, _STATIC)}
    assert two_entries["max.connections"].source == DYNAMIC_DEFAULT_BROKER_CONFIG


def _call(key: int, name: str, configs: list[tuple[str, int, str | None]], *,
          validate_only: bool = False) -> Call:
    version = 1 if key == INCREMENTAL_ALTER_CONFIGS_KEY else 2
    cls = request_class(key, version)
    resource_cls = nested(cls, "AlterConfigsResource")
    config_cls = nested(cls, "AlterableConfig")
    if key == INCREMENTAL_ALTER_CONFIGS_KEY:
        entries = tuple(build(config_cls, name=n, config_operation=op, value=v)
                        for n, op, v in configs)
    else:
        entries = tuple(build(config_cls, name=n, value=v) for n, _op, v in configs)
    resource = build(resource_cls, resource_type=4, resource_name=name, configs=entries)
    return Call(key, version, 1, "test", build(cls, resources=(resource,),
                                               validate_only=validate_only))


async def _answer(context: KafkaContext, call: Call) -> tuple[ErrorCode, str | None]:
    handler = (handle_incremental_alter_configs if call.api_key == INCREMENTAL_ALTER_CONFIGS_KEY
               else handle_alter_configs)
    [response] = (await handler(context, call)).responses
    return response.error_code, response.error_message


async def test_alter_configs_of_a_broker_check_all_then_apply_all_and_reach_every_broker(
        tmp_path: Path) -> None:
    store = RocksDBMetadataStore(tmp_path / "metadata")
    here = DynamicBrokerConfigs(store, _STATIC, lambda: 0)  # standalone's node id: 0
    other = DynamicBrokerConfigs(store, StaticConnectionSettings(), lambda: 7)
    context = KafkaContext(None, "127.0.0.1", ProducerIds(store),  # type: ignore[arg-type]  # no topics needed
                           dynamic_configs=here)
    incremental = INCREMENTAL_ALTER_CONFIGS_KEY
    try:
        await here.start()
        await other.start()
        # One bad entry: nothing of the resource is applied.
        code, message = await _answer(context, _call(incremental, "", [
            ("max.connections", _SET, "10"), ("num.io.threads", _SET, "4")]))
        assert code is ErrorCode.invalid_request and "cannot update 'num.io.threads'" in (
            message or "")
        code, message = await _answer(context, _call(incremental, "0", [
            ("max.connections", _SET, "10"), ("max.connections.per.ip", _SET, "x")]))
        assert code is ErrorCode.invalid_config and "not a number" in (message or "")
        code, _ = await _answer(context, _call(incremental, "0", [
            ("max.connections.per.ip.overrides", _APPEND, "127.0.0.1:1")]))
        assert code is ErrorCode.invalid_config
        code, message = await _answer(context, _call(incremental, "3", [
            ("max.connections", _SET, "10")]))
        assert code is ErrorCode.invalid_request and "unexpected broker id '3'" in (
            message or "")
        code, _ = await _answer(context, _call(incremental, "", [
            ("max.connections", _SET, "10")], validate_only=True))
        assert code is ErrorCode.none
        assert DynamicConfigTable.decode((await store.get(BROKER_CONFIGS_PATH)).data,
                                         0).scopes == {}
        # The cluster default and this broker's own value.
        assert await _answer(context, _call(incremental, "", [
            ("max.connection.creation.rate", _SET, "5"),
            ("listener.name.PLAIN.max.connections", _SET, "3")])) == (ErrorCode.none, None)
        assert await _answer(context, _call(incremental, "0", [
            ("max.connection.creation.rate", _SET, "50")])) == (ErrorCode.none, None)
        assert here.limits() == ConnectionLimits(500, UNLIMITED, {}, 50,
                                                 {"PLAIN": ListenerLimits(3, UNLIMITED)})

        async def other_sees(rate: int) -> bool:
            return other.limits().connection_rate == rate

        await wait_for_async(lambda: other_sees(5), "the other broker reads the default")
        assert other.limits().listener("plain").max_connections == 3
        # DELETE puts this broker back on the default; AlterConfigs replaces a scope's set.
        assert await _answer(context, _call(incremental, "0", [
            ("max.connection.creation.rate", _DELETE, None)])) == (ErrorCode.none, None)
        assert here.limits().connection_rate == 5
        assert await _answer(context, _call(ALTER_CONFIGS_KEY, "", [
            ("max.connections.per.ip", _SET, "4")])) == (ErrorCode.none, None)
        assert here.table.scopes == {"": {"max.connections.per.ip": "4"}}
        await wait_for_async(lambda: other_sees(UNLIMITED), "the other broker reloads")
        assert other.limits().max_per_ip == 4
    finally:
        await here.close()
        await other.close()
        await store.close()


def test_a_listener_at_its_cap_waits_and_a_raised_cap_frees_it() -> None:
    limits = [ConnectionLimits(listeners={"PLAIN": ListenerLimits(max_connections=1)})]

    async def run() -> None:
        gate = ConnectionQuotas(QuotaTable, limits=lambda: limits[0])
        assert (await gate.enter("10.0.0.1", "plain")).admitted
        assert (await gate.enter("10.0.0.1", "OTHER")).admitted  # another listener: no cap
        waiting = asyncio.ensure_future(gate.enter("10.0.0.2", "PLAIN"))
        for _ in range(3):
            await asyncio.sleep(0)
        assert not waiting.done()
        gate.leave("10.0.0.1", "OTHER")  # a slot on another listener: still waiting
        for _ in range(3):
            await asyncio.sleep(0)
        assert not waiting.done()
        limits[0] = ConnectionLimits(listeners={"PLAIN": ListenerLimits(max_connections=2)})
        assert (await waiting).admitted  # looked again within a second
        assert gate.total == 2

    asyncio.run(run())


def test_over_the_broker_wide_rate_a_connection_is_held_then_served() -> None:
    now = [0.0]
    limits = ConnectionLimits(connection_rate=1)

    async def run() -> list[Any]:
        gate = ConnectionQuotas(QuotaTable, limits=lambda: limits, clock=lambda: now[0])
        # 1/s over the 10 s minimum window: ten at once, the eleventh held (one window at
        # most), then served.
        return [await gate.enter("10.0.0.1") for _ in range(11)]

    before = _throttled("broker_rate")
    admissions = asyncio.run(run())
    assert all(admission.admitted for admission in admissions)
    assert _throttled("broker_rate") == before + 1


def _throttled(reason: str) -> float:
    value = REGISTRY.get_sample_value("folio_kafka_connections_throttled_total",
                                      {"reason": reason})
    assert value is not None
    return value


async def test_a_table_written_past_the_checks_leaves_the_start_up_limits(
        tmp_path: Path) -> None:
    store = RocksDBMetadataStore(tmp_path / "metadata")
    await store.create(BROKER_CONFIGS_PATH, b'{"scopes": {"": {"max.connections": "x"}}}',
                       make_parents=True)
    configs = DynamicBrokerConfigs(store, _STATIC, lambda: 0)
    try:
        await configs.start()
        assert configs.limits() == ConnectionLimits(max_connections=500)
    finally:
        await configs.close()
        await store.close()
