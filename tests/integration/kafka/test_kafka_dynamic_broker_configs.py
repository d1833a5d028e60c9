"""Kafka's dynamic broker configs on a real standalone: set by an AdminClient, applied live.

docs/kafka.md, "Dynamic broker configs". One ``folio standalone`` for the
module with two plaintext listeners, PLAIN (the admin client's) and CAPPED
(the one a per-listener cap is set on), and ``--kafka-max-connections`` (a
start-up flag: STATIC_BROKER_CONFIG). librdkafka's AdminClient changes the
broker resource with IncrementalAlterConfigs, the cluster default ("") and
this broker ("0"); no restart:

- ``listener.name.capped.max.connections`` 1: a second connection on CAPPED
  waits unanswered until the first closes;
- ``max.connection.creation.rate`` 1: connections over it are held, then served;
- DescribeConfigs answers each with its source and synonyms in Kafka's order;
- a key Folio does not change live is INVALID_REQUEST, a bad value
  INVALID_CONFIG, and nothing of that request is applied.

No timing is asserted.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
)
from kio.schema.errors import ErrorCode

from tests.integration.kafka.test_kafka_client_quotas import _call, _make
from tests.observability.scrape import metrics_url, scrape, wait_for
from tests.support.bookies import BookieProcess, BookieProcesses
from tests.support.kafka import raw_request, read_frame
from tests.support.standalone import start_standalone

DEADLINE_S = 60.0
_LISTENER = re.compile(r"kafka on (?P<host>[^\s:]+):(?P<port>\d+) \((?P<name>\w+)\)")
_THROTTLED = "folio_kafka_connections_throttled_total"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BookieProcess]:
    processes = BookieProcesses()
    try:
        yield start_standalone(
            processes, tmp_path_factory.mktemp("dynamic-configs"),
            "--kafka-listeners", "PLAIN://127.0.0.1:0,CAPPED://127.0.0.1:0",
            "--kafka-listener-security-protocol-map", "PLAIN:PLAINTEXT,CAPPED:PLAINTEXT",
            "--kafka-max-connections", "1000")
    finally:
        processes.kill_all()


@pytest.fixture(scope="module")
def addresses(server: BookieProcess) -> dict[str, tuple[str, int]]:
    found = {match["name"]: (match["host"], int(match["port"]))
             for match in _LISTENER.finditer(server.ready_line)}
    assert set(found) == {"PLAIN", "CAPPED"}, server.ready_line
    return found


_BOOTSTRAP: dict[int, str] = {}


@pytest.fixture(scope="module")
def admin(addresses: dict[str, tuple[str, int]]) -> AdminClient:
    host, port = addresses["PLAIN"]
    client = AdminClient({"bootstrap.servers": f"{host}:{port}"})
    _BOOTSTRAP[id(client)] = f"{host}:{port}"
    return client


def _bootstrap(admin: AdminClient) -> str:
    return _BOOTSTRAP[id(admin)]


def _alter(admin: AdminClient, name: str, *entries: tuple[str, Any, str | None]) -> None:
    """IncrementalAlterConfigs of broker ``name``: (key, operation, value) each.

    librdkafka refuses a broker resource named "" (Kafka's cluster-wide
    default, which the Java client sends): that one goes raw, as the Java
    client would send it.
    """
    if name == "":
        _alter_default(admin, *entries)
        return
    resource = ConfigResource(ConfigResource.Type.BROKER, name, incremental_configs=[
        ConfigEntry(key, value, incremental_operation=operation)
        for key, operation, value in entries])
    admin.incremental_alter_configs([resource])[resource].result(DEADLINE_S)


def _alter_default(admin: AdminClient, *entries: tuple[str, Any, str | None]) -> None:
    code, message = alter_raw(_bootstrap(admin), "", [
        (name, int(operation.value), value) for name, operation, value in entries])
    assert code is ErrorCode.none, (code, message)


def alter_raw(bootstrap: str, name: str, entries: list[tuple[str, int, str | None]]
              ) -> tuple[ErrorCode, str | None]:
    """IncrementalAlterConfigs v1 of broker ``name`` at ``bootstrap``: (code, message)."""
    key = 44
    request = _make(key, 1, resources=(_make(
        key, 1, "AlterConfigsResource", resource_type=4, resource_name=name, configs=tuple(
            _make(key, 1, "AlterableConfig", name=config, config_operation=operation,
                  value=value) for config, operation, value in entries)),), validate_only=False)
    [answer] = _call(bootstrap, key, 1, request).responses
    return answer.error_code, answer.error_message


def synonyms_raw(bootstrap: str, config: str) -> list[tuple[str, int]]:
    """DescribeConfigs v4 of the broker at ``bootstrap``: ``config``'s synonyms, in order.

    (value, source) of each; the one in force first.
    """
    key = 32
    request = _make(key, 4, resources=(_make(
        key, 4, "DescribeConfigsResource", resource_type=4, resource_name="",
        configuration_keys=(config,)),), include_synonyms=True, include_documentation=False)
    [result] = _call(bootstrap, key, 4, request).results
    assert result.error_code is ErrorCode.none, result.error_message
    [entry] = result.configs
    return [(each.value, int(each.source)) for each in entry.synonyms]


def _described(admin: AdminClient) -> dict[str, Any]:
    resource = ConfigResource(ConfigResource.Type.BROKER, "0")
    return dict(admin.describe_configs([resource])[resource].result(DEADLINE_S))


def _answers(sock: socket.socket) -> bool:
    """Whether the broker answers an ApiVersions on ``sock``."""
    request = _make(18, 3, client_software_name="dyncfg-test", client_software_version="1")
    sock.sendall(raw_request(18, 3, 7, request))
    return read_frame(sock) is not None


def _throttled(server: BookieProcess, reason: str) -> float:
    return scrape(metrics_url(server)).value(_THROTTLED, reason=reason)


def test_a_listener_cap_set_live_holds_a_second_connection_until_the_first_closes(
        server: BookieProcess, addresses: dict[str, tuple[str, int]],
        admin: AdminClient) -> None:
    _alter(admin, "", ("listener.name.capped.max.connections", AlterConfigOpType.SET, "1"))
    waited = _throttled(server, "max_connections")
    first = socket.create_connection(addresses["CAPPED"], timeout=DEADLINE_S)
    try:
        assert _answers(first)
        with socket.create_connection(addresses["CAPPED"], timeout=DEADLINE_S) as second:
            second.sendall(raw_request(18, 3, 8, _make(
                18, 3, client_software_name="dyncfg-test", client_software_version="1")))
            wait_for(metrics_url(server),
                     lambda page: page.value(_THROTTLED, reason="max_connections") > waited,
                     timeout_s=DEADLINE_S, what="the second connection waiting at the cap")
            with socket.create_connection(addresses["PLAIN"], timeout=DEADLINE_S) as plain:
                assert _answers(plain)  # the other listener is not capped
            first.close()
            assert read_frame(second) is not None  # the slot freed: served
    finally:
        first.close()
    entry = _described(admin)["listener.name.capped.max.connections"]
    assert (entry.value, entry.source) == ("1", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
    _alter(admin, "", ("listener.name.capped.max.connections", AlterConfigOpType.DELETE, None))
    assert "listener.name.capped.max.connections" not in _described(admin)


def test_over_the_broker_wide_creation_rate_connections_are_held_then_served(
        server: BookieProcess, addresses: dict[str, tuple[str, int]],
        admin: AdminClient) -> None:
    _alter(admin, "0", ("max.connection.creation.rate", AlterConfigOpType.SET, "1"))
    held = _throttled(server, "broker_rate")
    try:
        # 1 per second over Kafka's 10 s minimum window: the twelfth at once is over it.
        for _ in range(12):
            with socket.create_connection(addresses["CAPPED"], timeout=DEADLINE_S) as sock:
                assert _answers(sock)
        assert _throttled(server, "broker_rate") > held
    finally:
        _alter(admin, "0", ("max.connection.creation.rate", AlterConfigOpType.DELETE, None))


def test_describe_configs_reports_each_source_with_its_synonyms_in_kafkas_order(
        admin: AdminClient) -> None:
    _alter(admin, "", ("max.connections", AlterConfigOpType.SET, "900"),
           ("max.connections.per.ip", AlterConfigOpType.SET, "50"))
    _alter(admin, "0", ("max.connections", AlterConfigOpType.SET, "800"))
    try:
        configs = _described(admin)
        connections = configs["max.connections"]
        assert (connections.value, connections.source, connections.is_read_only) == (
            "800", ConfigSource.DYNAMIC_BROKER_CONFIG.value, False)
        # librdkafka keys synonyms by name (here all one name): read them raw.
        assert synonyms_raw(_bootstrap(admin), "max.connections") == [
            ("800", ConfigSource.DYNAMIC_BROKER_CONFIG.value),
            ("900", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value),
            ("1000", ConfigSource.STATIC_BROKER_CONFIG.value),
            ("2147483647", ConfigSource.DEFAULT_CONFIG.value)]
        assert configs["max.connections.per.ip"].source == (
            ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
        assert configs["max.connection.creation.rate"].source == (
            ConfigSource.DEFAULT_CONFIG.value)
    finally:
        _alter(admin, "", ("max.connections", AlterConfigOpType.DELETE, None),
               ("max.connections.per.ip", AlterConfigOpType.DELETE, None))
        _alter(admin, "0", ("max.connections", AlterConfigOpType.DELETE, None))
    assert _described(admin)["max.connections"].source == ConfigSource.STATIC_BROKER_CONFIG.value


def test_a_key_not_changed_live_or_a_bad_value_is_refused_and_nothing_is_applied(
        admin: AdminClient) -> None:
    for entries, code, message in [
            ([("max.connections", "5"), ("num.io.threads", "4")], KafkaError.INVALID_REQUEST,
             "cannot update 'num.io.threads' dynamically"),
            ([("max.connections", "5"), ("max.connections.per.ip", "-1")],
             KafkaError.INVALID_CONFIG, "must be at least 0")]:
        with pytest.raises(KafkaException) as caught:
            _alter(admin, "0", *[(key, AlterConfigOpType.SET, value) for key, value in entries])
        error = caught.value.args[0]
        assert error.code() == code and message in error.str(), error
    assert _described(admin)["max.connections"].source == ConfigSource.STATIC_BROKER_CONFIG.value
