"""TLS and SASL on the Kafka listener, with real clients (librdkafka and kafka-python).

Three ``folio standalone`` processes for the module, each with the API on
TLS (trustme certificates) and token authentication (super-user ``admin``):
a SASL_SSL listener, a SASL_PLAINTEXT one (``--kafka-allow-plaintext``) and
an SSL one with client certificates (``--tls-ca``). Token authentication
makes the grants apply on the Kafka port: role ``app`` is granted every action
on every topic and group (over gRPC, as ``admin``). Every client and
mechanism produces a record and reads it back; a wrong password, an expired
token, a wrong CA and no credentials are each refused with the error the
client shows, and the broker counts the refusal by reason.
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialAlteration,
    UserScramCredentialUpsertion,
)
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaPythonPartition
from kafka.net.sasl.oauth import AbstractTokenProvider

import folio
from ledger.security.tokens import create_token
from tests.support.bookies import BookieProcess, BookieProcesses
from tests.support.certs import Pki
from tests.support.kafka import kafka_address
from tests.support.kafka_clients import librdkafka_round_trip
from tests.support.standalone import start_standalone

DEADLINE_S = 60.0
_SECRET = b"kafka-security-test-secret-0123456789abcdef"
MECHANISMS = ["OAUTHBEARER", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
SCRAM_PASSWORD = "scram-secret-password"


@dataclass(frozen=True)
class Listener:
    """One secured standalone and what a client needs to reach its Kafka port."""

    server: BookieProcess
    bootstrap: str
    protocol: str
    pki: Pki

    def metric(self, reason: str) -> float:
        """``folio_kafka_auth_failures_total{reason}`` scraped from the server."""
        match = re.search(r"metrics on (https?://\S+/metrics)", self.server.ready_line)
        assert match is not None, self.server.ready_line
        text = urllib.request.urlopen(match[1], timeout=10).read().decode()
        found = re.search(rf'folio_kafka_auth_failures_total{{reason="{reason}"}} (\S+)', text)
        return 0.0 if found is None else float(found[1])


def _token(role: str, **kwargs: Any) -> str:
    return create_token(role, _SECRET, "HS256", **kwargs)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return Pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def processes() -> Iterator[BookieProcesses]:
    made = BookieProcesses()
    yield made
    made.kill_all()


def _start(processes: BookieProcesses, pki: Pki, root: Path, protocol: str,
           *extra: str) -> Listener:
    secret = root / "secret"
    secret.write_bytes(_SECRET + b"\n")
    cert = pki.server()
    started = start_standalone(
        processes, root / "data", "--tls-cert", str(cert.cert), "--tls-key", str(cert.key),
        "--auth-token-secret-file", str(secret), "--super-users", "admin",
        "--kafka-port", "0", "--kafka-security-protocol", protocol, *extra)
    _grant_app(started, pki, mutual="--tls-ca" in extra)
    host, port = kafka_address(started)
    return Listener(started, f"{host}:{port}", protocol, pki)


def _grant_app(server: BookieProcess, pki: Pki, *, mutual: bool) -> None:
    """Every action on every topic and group for role ``app``, granted by ``admin`` over gRPC."""
    tls = folio.TLS(ca=str(pki.ca))
    if mutual:  # --tls-ca: the API asks a client certificate too
        admin_cert = pki.client("admin")
        tls = folio.TLS(ca=str(pki.ca), cert=str(admin_cert.cert), key=str(admin_cert.key))
    with folio.Client(server.address, tls=tls, token=_token("admin"), timeout_s=30) as admin:
        admin.grant_permission("app", "*", ["produce", "consume", "admin"])
        admin.grant_permission("app", "*", ["consume"], kind="group")


@pytest.fixture(scope="module")
def sasl_ssl(processes: BookieProcesses, pki: Pki,
             tmp_path_factory: pytest.TempPathFactory) -> Listener:
    return _start(processes, pki, tmp_path_factory.mktemp("sasl-ssl"), "SASL_SSL")


@pytest.fixture(scope="module")
def sasl_plaintext(processes: BookieProcesses, pki: Pki,
                   tmp_path_factory: pytest.TempPathFactory) -> Listener:
    return _start(processes, pki, tmp_path_factory.mktemp("sasl-plain"), "SASL_PLAINTEXT",
                  "--kafka-allow-plaintext")


@pytest.fixture(scope="module")
def mutual_ssl(processes: BookieProcesses, pki: Pki,
               tmp_path_factory: pytest.TempPathFactory) -> Listener:
    return _start(processes, pki, tmp_path_factory.mktemp("ssl"), "SSL", "--tls-ca",
                  str(pki.ca))


# -- client settings ------------------------------------------------------------------


def confluent_settings(listener: Listener, mechanism: str, role: str, *,
                       password: str | None = None, token: str | None = None) -> dict[str, Any]:
    settings: dict[str, Any] = {"bootstrap.servers": listener.bootstrap,
                                "security.protocol": listener.protocol,
                                "sasl.mechanisms": mechanism}
    if listener.protocol.endswith("SSL"):
        settings["ssl.ca.location"] = str(listener.pki.ca)
    token = token if token is not None else _token(role, expiry_s=3600)
    if mechanism == "OAUTHBEARER":
        settings["oauth_cb"] = lambda _config: (token, time.time() + 3600)
    elif mechanism == "PLAIN":
        settings.update({"sasl.username": role, "sasl.password": token})
    else:
        settings.update({"sasl.username": role,
                         "sasl.password": password if password is not None else SCRAM_PASSWORD})
    return settings


class _Tokens(AbstractTokenProvider):  # type: ignore[misc]
    def __init__(self, token: str) -> None:
        super().__init__()
        self._token = token

    def token(self) -> str:
        return self._token


def kafka_python_settings(listener: Listener, mechanism: str, role: str, *,
                          password: str | None = None,
                          token: str | None = None) -> dict[str, Any]:
    settings: dict[str, Any] = {"bootstrap_servers": listener.bootstrap,
                                "security_protocol": listener.protocol,
                                "sasl_mechanism": mechanism,
                                "request_timeout_ms": 20000}
    if listener.protocol.endswith("SSL"):
        settings.update({"ssl_cafile": str(listener.pki.ca), "ssl_check_hostname": True})
    token = token if token is not None else _token(role, expiry_s=3600)
    if mechanism == "OAUTHBEARER":
        settings["sasl_oauth_token_provider"] = _Tokens(token)
    elif mechanism == "PLAIN":
        settings.update({"sasl_plain_username": role, "sasl_plain_password": token})
    else:
        settings.update({"sasl_plain_username": role,
                         "sasl_plain_password": password if password is not None
                         else SCRAM_PASSWORD})
    return settings


def add_scram_user(listener: Listener, user: str, password: str = SCRAM_PASSWORD) -> None:
    """SCRAM-SHA-256 and -512 credentials for ``user``, through AlterUserScramCredentials."""
    admin = AdminClient(confluent_settings(listener, "PLAIN", "admin"))
    upserts: list[UserScramCredentialAlteration] = [
        UserScramCredentialUpsertion(user, ScramCredentialInfo(mechanism, 4096), password.encode())
        for mechanism in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512)]
    for future in admin.alter_user_scram_credentials(upserts).values():
        future.result(DEADLINE_S)


def kafka_python_round_trip(settings: dict[str, Any], topic: str) -> bytes:
    """Produce one record (the topic auto-created by Metadata? no: made by librdkafka first)."""
    producer = KafkaProducer(**settings)
    value = uuid.uuid4().bytes
    try:
        producer.send(topic, value=value, partition=0).get(DEADLINE_S)
    finally:
        producer.close()
    consumer = KafkaConsumer(**settings, enable_auto_commit=False)
    partition = KafkaPythonPartition(topic, 0)
    values: list[bytes] = []
    deadline = time.monotonic() + DEADLINE_S
    try:
        consumer.assign([partition])
        consumer.seek_to_beginning()
        # Poll until the record is read, not until a quiet spell (consumer_timeout_ms).
        while value not in values and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                values.extend(record.value for record in records)
    finally:
        consumer.close()
    assert value in values, values
    return value


def _errors_of(settings: dict[str, Any]) -> list[KafkaError]:
    """The errors a librdkafka client reports (error_cb) while it tries to reach the broker."""
    errors: list[KafkaError] = []
    # Any: confluent-kafka types config values as str | int | float; error_cb is a callable.
    config: dict[str, Any] = {**settings, "error_cb": errors.append}
    admin = AdminClient(config)
    deadline = time.monotonic() + DEADLINE_S
    while not errors:
        assert time.monotonic() < deadline, "the client reported no error"
        with contextlib.suppress(Exception):
            admin.list_topics(timeout=1)
        admin.poll(0.1)
    return errors


# -- every client and mechanism ------------------------------------------------------


@pytest.fixture(scope="module")
def listeners(sasl_ssl: Listener, sasl_plaintext: Listener) -> dict[str, Listener]:
    for listener in (sasl_ssl, sasl_plaintext):
        add_scram_user(listener, "app")
    return {"SASL_SSL": sasl_ssl, "SASL_PLAINTEXT": sasl_plaintext}


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_librdkafka_each_mechanism(listeners: dict[str, Listener], protocol: str,
                                   mechanism: str) -> None:
    listener = listeners[protocol]
    topic = f"rd-{mechanism.lower()}-{protocol.lower()}"
    assert librdkafka_round_trip(confluent_settings(listener, mechanism, "app"), topic)


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kafka_python_each_mechanism(listeners: dict[str, Listener], protocol: str,
                                     mechanism: str) -> None:
    listener = listeners[protocol]
    topic = f"kp-{mechanism.lower()}-{protocol.lower()}"
    admin = AdminClient(confluent_settings(listener, "PLAIN", "admin"))
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(DEADLINE_S)
    assert kafka_python_round_trip(kafka_python_settings(listener, mechanism, "app"), topic)


def test_ssl_with_client_certificates(mutual_ssl: Listener) -> None:
    client = mutual_ssl.pki.client("app")
    settings = {"bootstrap.servers": mutual_ssl.bootstrap, "security.protocol": "SSL",
                "ssl.ca.location": str(mutual_ssl.pki.ca),
                "ssl.certificate.location": str(client.cert),
                "ssl.key.location": str(client.key)}
    assert librdkafka_round_trip(settings, "ssl-rd")
    python_settings = {"bootstrap_servers": mutual_ssl.bootstrap, "security_protocol": "SSL",
                       "ssl_cafile": str(mutual_ssl.pki.ca), "ssl_certfile": str(client.cert),
                       "ssl_keyfile": str(client.key), "request_timeout_ms": 20000}
    assert kafka_python_round_trip(python_settings, "ssl-rd")


# -- refusals ------------------------------------------------------------------------


def test_wrong_scram_password_is_refused(listeners: dict[str, Listener]) -> None:
    listener = listeners["SASL_SSL"]
    before = listener.metric("bad_credentials")
    errors = _errors_of(confluent_settings(listener, "SCRAM-SHA-256", "app",
                                           password="not-the-password"))
    assert errors[0].code() == KafkaError._AUTHENTICATION, errors
    assert "authentication failed" in errors[0].str().lower()
    assert listener.metric("bad_credentials") > before


def test_expired_token_is_refused(listeners: dict[str, Listener]) -> None:
    listener = listeners["SASL_SSL"]
    expired = create_token("app", _SECRET, "HS256", expiry_s=1, clock=lambda: time.time() - 60)
    errors = _errors_of(confluent_settings(listener, "PLAIN", "app", token=expired))
    assert errors[0].code() == KafkaError._AUTHENTICATION, errors
    assert "expired" in errors[0].str()
    assert listener.metric("expired_token") >= 1


def test_wrong_ca_is_refused(listeners: dict[str, Listener],
                             tmp_path: Path) -> None:
    listener = listeners["SASL_SSL"]
    other = Pki(tmp_path / "other", "other")
    settings = {**confluent_settings(listener, "PLAIN", "app"), "ssl.ca.location": str(other.ca)}
    errors = _errors_of(settings)
    # librdkafka reports the failed handshake as _SSL, or (seen once in a full
    # run) as _TRANSPORT when the socket's close reaches it first: the reason is
    # the same, the verification.
    assert errors[0].code() in (KafkaError._SSL, KafkaError._TRANSPORT), errors
    assert "certificate verify failed" in errors[0].str()


def test_no_credentials_are_refused(listeners: dict[str, Listener]) -> None:
    listener = listeners["SASL_SSL"]
    before = listener.metric("unauthenticated_request")
    settings = {"bootstrap.servers": listener.bootstrap, "security.protocol": "SSL",
                "ssl.ca.location": str(listener.pki.ca)}
    errors = _errors_of(settings)
    assert {error.code() for error in errors} <= {KafkaError._TRANSPORT,
                                                  KafkaError._ALL_BROKERS_DOWN}, errors
    assert listener.metric("unauthenticated_request") > before


def test_client_certificate_from_another_ca_is_refused(mutual_ssl: Listener,
                                                      tmp_path: Path) -> None:
    client = Pki(tmp_path / "rogue", "rogue").client("app")
    before = mutual_ssl.metric("tls_handshake")
    errors = _errors_of({"bootstrap.servers": mutual_ssl.bootstrap, "security.protocol": "SSL",
                         "ssl.ca.location": str(mutual_ssl.pki.ca),
                         "ssl.certificate.location": str(client.cert),
                         "ssl.key.location": str(client.key)})
    # TLS 1.3: the client learns of the refusal after its handshake, as a closed connection.
    assert errors[0].code() in (KafkaError._SSL, KafkaError._TRANSPORT,
                                KafkaError._ALL_BROKERS_DOWN), errors
    assert mutual_ssl.metric("tls_handshake") > before


_REFUSAL_SCRIPT = """
import json, logging, sys
logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
from kafka import KafkaProducer
try:
    KafkaProducer(**json.loads(sys.argv[1]), max_block_ms=10000, bootstrap_timeout_ms=3000)
except Exception as error:
    print(type(error).__name__, error)
"""


def _kafka_python_refusal(settings: dict[str, Any]) -> tuple[str, str]:
    """(what kafka-python raised, its log) when it cannot connect with ``settings``.

    In a process of its own: a producer that fails to bootstrap leaves its
    sockets to the garbage collector (kafka-python 3.0), whose warnings would
    land on whichever test runs then. ``bootstrap_timeout_ms`` is how long
    kafka-python keeps retrying (with backoff) before it raises; its first
    attempt is refused within milliseconds (30-90 ms seen on a loaded machine),
    so 3 s rather than its default 30 s.
    """
    done = subprocess.run([sys.executable, "-c", _REFUSAL_SCRIPT, json.dumps(settings)],
                          capture_output=True, text=True, timeout=DEADLINE_S, check=False)
    return done.stdout, done.stderr


@pytest.mark.parametrize(("case", "shown"), [
    ("wrong_password", "SaslAuthenticationFailedError: authentication failed (SCRAM-SHA-512)"),
    ("expired_token", "SaslAuthenticationFailedError: authentication failed: the token has "
     "expired"),
    ("wrong_ca", "CERTIFICATE_VERIFY_FAILED"),
    ("no_credentials", "KafkaConnectionError: socket disconnected"),
])
def test_kafka_python_refusals(listeners: dict[str, Listener], tmp_path: Path,
                               case: str, shown: str) -> None:
    """kafka-python gives up bootstrapping; its log says why (the broker's reason)."""
    listener = listeners["SASL_SSL"]
    if case == "wrong_password":
        settings = kafka_python_settings(listener, "SCRAM-SHA-512", "app", password="nope")
    elif case == "expired_token":
        expired = create_token("app", _SECRET, "HS256", expiry_s=1,
                               clock=lambda: time.time() - 60)
        settings = kafka_python_settings(listener, "PLAIN", "app", token=expired)
    elif case == "wrong_ca":
        settings = {**kafka_python_settings(listener, "PLAIN", "app"),
                    "ssl_cafile": str(Pki(tmp_path / "other", "other").ca)}
    else:
        settings = {"bootstrap_servers": listener.bootstrap, "security_protocol": "SSL",
                    "ssl_cafile": str(listener.pki.ca), "request_timeout_ms": 20000}
    raised, log = _kafka_python_refusal(settings)
    assert raised.startswith("KafkaTimeoutError"), (raised, log[-2000:])
    assert "Unable to bootstrap" in raised
    assert shown in log
