"""Two named Kafka listeners on one standalone: each client is told its own listener's address.

One ``folio standalone`` for the module with ``--kafka-listeners``: PLAIN
(PLAINTEXT on 127.0.0.1) and SECURE (SSL, trustme certificates, advertised
as ``localhost``), the API on TLS too (so PLAIN needs
``--kafka-allow-plaintext``). librdkafka bootstrapped on each listener sees
only that listener's address in Metadata and DescribeConfigs lists both;
a record produced on one listener is read on the other, the SSL side in a
consumer group (FindCoordinator must name the SSL address, or librdkafka
would speak TLS to the plain port and never join).
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from tests.support.bookies import BookieProcess, BookieProcesses
from tests.support.certs import Pki
from tests.support.standalone import start_standalone

DEADLINE_S = 60.0
_LISTENER = re.compile(r"kafka on (?P<host>[^\s:]+):(?P<port>\d+) \((?P<name>\w+)\)")


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return Pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def server(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BookieProcess]:
    processes = BookieProcesses()
    cert = pki.server()
    try:
        yield start_standalone(
            processes, tmp_path_factory.mktemp("listeners"),
            "--tls-cert", str(cert.cert), "--tls-key", str(cert.key),
            "--kafka-listeners", "PLAIN://127.0.0.1:0,secure://127.0.0.1:0",
            "--kafka-advertised-listeners", "SECURE://localhost:0",
            "--kafka-listener-security-protocol-map", "PLAIN:PLAINTEXT,SECURE:SSL",
            "--kafka-allow-plaintext")
    finally:
        processes.kill_all()


@pytest.fixture(scope="module")
def settings(server: BookieProcess, pki: Pki) -> dict[str, dict[str, Any]]:
    """librdkafka settings per listener, from the ready line (``kafka on H:P (NAME)``)."""
    found = {match["name"]: (match["host"], match["port"])
             for match in _LISTENER.finditer(server.ready_line)}
    assert set(found) == {"PLAIN", "SECURE"}, server.ready_line
    return {
        "PLAIN": {"bootstrap.servers": ":".join(found["PLAIN"])},
        # Bootstrapped by the bound address; Metadata then says localhost.
        "SECURE": {"bootstrap.servers": ":".join(found["SECURE"]), "security.protocol": "SSL",
                   "ssl.ca.location": str(pki.ca)},
    }


def _brokers(settings: dict[str, Any]) -> list[tuple[str | None, int]]:
    metadata = AdminClient(dict(settings)).list_topics(timeout=DEADLINE_S)
    return [(broker.host, broker.port) for broker in metadata.brokers.values()]


def test_metadata_names_the_listener_asked(settings: dict[str, dict[str, Any]]) -> None:
    plain_port = int(settings["PLAIN"]["bootstrap.servers"].rpartition(":")[2])
    secure_port = int(settings["SECURE"]["bootstrap.servers"].rpartition(":")[2])
    assert _brokers(settings["PLAIN"]) == [("127.0.0.1", plain_port)]
    assert _brokers(settings["SECURE"]) == [("localhost", secure_port)]
    resource = ConfigResource(ConfigResource.Type.BROKER, "0")
    admin = AdminClient(dict(settings["SECURE"]))  # kept: its futures die with it
    described = admin.describe_configs([resource])[resource].result(DEADLINE_S)
    assert described["advertised.listeners"].value == (
        f"PLAIN://127.0.0.1:{plain_port},SECURE://localhost:{secure_port}")
    assert described["listener.security.protocol.map"].value == "PLAIN:PLAINTEXT,SECURE:SSL"


def test_produce_on_one_listener_consume_in_a_group_on_the_other(
        settings: dict[str, dict[str, Any]]) -> None:
    topic = f"listeners-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(dict(settings["PLAIN"]))
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(DEADLINE_S)
    producer = Producer({**settings["PLAIN"], "linger.ms": 0})
    value = uuid.uuid4().bytes
    errors: list[Any] = []
    producer.produce(topic, value=value,
                     on_delivery=lambda error, _m: errors.append(error) if error else None)
    assert producer.flush(DEADLINE_S) == 0 and errors == []
    consumer = Consumer({**settings["SECURE"], "group.id": f"g-{topic}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    deadline = time.monotonic() + DEADLINE_S
    try:
        while True:
            assert time.monotonic() < deadline, "no record read back in the group"
            message = consumer.poll(0.5)
            if message is not None:
                assert message.error() is None, message.error()
                assert message.value() == value
                break
        # The commit goes to the coordinator FindCoordinator named on SSL.
        committed = consumer.commit(message=message, asynchronous=False)
        assert committed is not None and committed[0].offset == 1
    finally:
        consumer.close()
