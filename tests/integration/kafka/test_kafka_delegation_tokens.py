"""Kafka delegation tokens (KIP-48): the four APIs over a raw socket, and clients using a token.

A ``folio standalone`` with token authentication (HS256, super-user
``admin``), ``--kafka-delegation-token-secret-file`` and a SASL_PLAINTEXT
listener: raw connections authenticate with PLAIN (a Folio JWT) as alice,
bob, carol or admin and send kio-encoded requests, so the test sees the exact
error codes. A token authenticates with SCRAM-SHA-512: a raw client sending
Kafka's ``tokenauth=true`` extension, librdkafka and kafka-python (which
cannot send it: the token id as user name is enough here), producing (and
librdkafka consuming) as the owner; once expired it authenticates no more. A
second standalone with a PLAINTEXT listener and
``--kafka-delegation-token-secret-file`` refuses every token request (no one is
authenticated there).
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import hmac
import secrets
import socket
import struct
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaProducer
from kafka.net.sasl.scram import ScramClient
from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

import folio
from ledger.security.tokens import create_token
from tests.support.bookies import BookieProcess, BookieProcesses, run_folio
from tests.support.kafka import kafka_address, raw_request, read_frame, read_response, sasl_plain
from tests.support.kafka_clients import librdkafka_round_trip
from tests.support.standalone import start_standalone

DEADLINE_S = 60.0
_SECRET = b"kafka-delegation-test-secret-0123456789abcdef"
_DELEGATION_SECRET = b"the-delegation-token-secret"
_DAY_MS = 24 * 3600 * 1000


@pytest.fixture(scope="module")
def processes() -> Iterator[BookieProcesses]:
    made = BookieProcesses()
    yield made
    made.kill_all()


@pytest.fixture(scope="module")
def server(processes: BookieProcesses, tmp_path_factory: pytest.TempPathFactory
           ) -> BookieProcess:
    root = tmp_path_factory.mktemp("tokens")
    secret, delegation = root / "secret", root / "delegation-secret"
    secret.write_bytes(_SECRET + b"\n")
    delegation.write_bytes(_DELEGATION_SECRET + b"\n")
    started = start_standalone(
        processes, root / "data", "--auth-token-secret-file", str(secret),
        "--kafka-delegation-token-secret-file", str(delegation),
        "--super-users", "admin", "--kafka-port", "0",
        "--kafka-security-protocol", "SASL_PLAINTEXT",
        "--kafka-sasl-mechanisms", "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512")
    with folio.Client(started.address, token=_jwt("admin"), timeout_s=30) as admin:
        admin.grant_permission("alice", "*", ["produce", "consume", "admin"])
        admin.grant_permission("alice", "*", ["consume"], kind="group")
    return started


@pytest.fixture(scope="module")
def plaintext(processes: BookieProcesses, tmp_path_factory: pytest.TempPathFactory
              ) -> BookieProcess:
    root = tmp_path_factory.mktemp("plaintext")
    secret = root / "delegation-secret"
    secret.write_bytes(secrets.token_bytes(32))
    return start_standalone(processes, root / "data", "--kafka-port", "0",
                            "--kafka-delegation-token-secret-file", str(secret))


def _jwt(role: str) -> str:
    return create_token(role, _SECRET, "HS256", expiry_s=3600)


def _call(sock: socket.socket, api_key: int, version: int, **fields: Any) -> Any:
    """The decoded answer; a refusal only as its ``error_code`` (see ``_Refused``)."""
    request = load_request_schema(api_key, version)(**fields)
    sock.sendall(raw_request(api_key, version, 7, request))
    if api_key not in (38, 39, 40):
        correlation_id, response = read_response(sock, api_key, version)
        assert correlation_id == 7
        return response
    data = read_frame(sock)
    assert data is not None, "the broker closed the connection"
    cls: Any = load_response_schema(api_key, version)
    header, used = entity_reader(cls.__header_schema__)(data, 0)
    assert header.correlation_id == 7
    (code,) = struct.unpack_from(">h", data, used)  # every answer's first field
    if code != 0:
        return _Refused(ErrorCode(code))
    return entity_reader(cls)(data, used)[0]


@dataclass(frozen=True)
class _Refused:
    """A refused Create, Renew or Expire: its timestamps are Kafka's -1, which kio's
    reader refuses to decode (Kafka's clients read them as plain longs)."""

    error_code: ErrorCode


@pytest.fixture
def connect(server: BookieProcess) -> Iterator[Any]:
    """``connect(role)``: a raw connection authenticated as ``role`` with PLAIN."""
    made: list[socket.socket] = []

    def connect(role: str) -> socket.socket:
        sock = socket.create_connection(kafka_address(server), timeout=DEADLINE_S)
        made.append(sock)
        sasl_plain(sock, _jwt(role))
        return sock

    yield connect
    for sock in made:
        sock.close()


def _user(name: str, kind: str = "User") -> dict[str, str]:
    return {"principal_type": kind, "principal_name": name}


def _create(sock: socket.socket, *, renewers: tuple[str, ...] = (), max_lifetime_ms: int = -1,
            owner: str | None = None, owner_type: str = "User", version: int = 3) -> Any:
    renewer = sys.modules[load_request_schema(38, version).__module__].CreatableRenewers
    fields: dict[str, Any] = {
        "renewers": tuple(renewer(**_user(name)) for name in renewers),
        "max_lifetime": _ms(max_lifetime_ms)}
    if version >= 3:
        fields.update(owner_principal_type=owner_type if owner else None,
                      owner_principal_name=owner)
    return _call(sock, 38, version, **fields)


def _ms(value: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=value)


def _epoch_ms(value: datetime.datetime) -> int:
    return round(value.timestamp() * 1000)


def _renew(sock: socket.socket, token_hmac: bytes, period_ms: int = -1) -> Any:
    return _call(sock, 39, 2, hmac=token_hmac, renew_period=_ms(period_ms))


def _expire(sock: socket.socket, token_hmac: bytes, period_ms: int = -1) -> Any:
    return _call(sock, 40, 2, hmac=token_hmac, expiry_time_period=_ms(period_ms))


def _describe(sock: socket.socket, owners: tuple[str, ...] | None = None) -> Any:
    owner_cls = sys.modules[load_request_schema(41, 3).__module__].DescribeDelegationTokenOwner
    return _call(sock, 41, 3, owners=None if owners is None
                 else tuple(owner_cls(**_user(name)) for name in owners))


def _ids(answer: Any) -> set[str]:
    assert answer.error_code == ErrorCode.none, answer
    return {token.token_id for token in answer.tokens}


def _scram(sock: socket.socket, user: str, password: str, *, tokenauth: bool,
           mechanism: str = "SCRAM-SHA-512") -> Any:
    """A raw SCRAM exchange, with Kafka's ``tokenauth=true`` extension when asked."""
    handshake = _call(sock, 17, 1, mechanism=mechanism)
    assert handshake.error_code == ErrorCode.none
    client = ScramClient(user, password, mechanism)
    first = client.first_message()
    if tokenauth:  # the extension is part of client-first-message-bare: the proof covers it
        first += b",tokenauth=true"
        client.auth_message += b",tokenauth=true"
    answer = _call(sock, 36, 2, auth_bytes=first)
    if answer.error_code != ErrorCode.none:
        return answer
    client.process_server_first_message(answer.auth_bytes)
    return _call(sock, 36, 2, auth_bytes=client.final_message())


def _password(token_hmac: bytes) -> str:
    return base64.b64encode(token_hmac).decode()


# -- the APIs --------------------------------------------------------------------------


def test_create_describe_renew_expire(connect: Any) -> None:
    alice, bob, carol, admin = (connect(role) for role in ("alice", "bob", "carol", "admin"))
    created = _create(alice, renewers=("bob",))
    assert created.error_code == ErrorCode.none
    assert (created.principal_type, created.principal_name) == ("User", "alice")
    assert created.token_requester_principal_name == "alice"
    issue = _epoch_ms(created.issue_timestamp)
    assert _epoch_ms(created.expiry_timestamp) == issue + _DAY_MS  # expiry.time.ms
    assert _epoch_ms(created.max_timestamp) == issue + 7 * _DAY_MS  # max.lifetime.ms
    # Kafka's HMAC: HMAC-SHA512 of the token id under the secret.
    assert created.hmac == hmac.digest(_DELEGATION_SECRET, created.token_id.encode(),
                                       "sha512")
    token_id = created.token_id
    # Describe: the owner, a renewer and a super-user see it; another role does not.
    for sock in (alice, bob, admin):
        described = _describe(sock)
        assert token_id in _ids(described)
    mine = next(token for token in _describe(alice).tokens if token.token_id == token_id)
    assert mine.hmac == created.hmac and [r.principal_name for r in mine.renewers] == ["bob"]
    assert token_id not in _ids(_describe(carol))
    assert token_id in _ids(_describe(admin, owners=("bob",)))  # a renewer's too, as Kafka
    assert token_id not in _ids(_describe(admin, owners=("carol",)))
    assert _ids(_describe(admin, owners=())) == set()
    # Renew: a renewer may, by a period; another role may not.
    before = int(time.time() * 1000)
    renewed = _renew(bob, created.hmac, 60_000)
    after = int(time.time() * 1000)
    assert renewed.error_code == ErrorCode.none
    assert before + 60_000 <= _epoch_ms(renewed.expiry_timestamp) <= after + 60_000
    assert _renew(carol, created.hmac).error_code == ErrorCode.delegation_token_owner_mismatch
    assert _expire(carol, created.hmac).error_code == ErrorCode.delegation_token_owner_mismatch
    # Renew without a period: the broker's expiry time, never past the maximum.
    assert _renew(alice, created.hmac).error_code == ErrorCode.none
    # Expire now (period -1): gone.
    assert _expire(alice, created.hmac).error_code == ErrorCode.none
    assert _renew(alice, created.hmac).error_code == ErrorCode.delegation_token_not_found
    assert token_id not in _ids(_describe(admin))


def test_unknown_hmac_is_not_found(connect: Any) -> None:
    alice = connect("alice")
    unknown = secrets.token_bytes(64)
    assert _renew(alice, unknown).error_code == ErrorCode.delegation_token_not_found
    assert _expire(alice, unknown).error_code == ErrorCode.delegation_token_not_found


def test_an_expired_token_is_refused_everywhere(connect: Any, server: BookieProcess) -> None:
    alice = connect("alice")
    created = _create(alice)
    expired = _expire(alice, created.hmac, 0)  # expiry = now: expired from now on
    assert expired.error_code == ErrorCode.none
    assert _renew(alice, created.hmac).error_code == ErrorCode.delegation_token_expired
    assert _expire(alice, created.hmac).error_code == ErrorCode.delegation_token_expired
    assert created.token_id not in _ids(_describe(alice))
    with socket.create_connection(kafka_address(server), timeout=DEADLINE_S) as sock:
        answer = _scram(sock, created.token_id, _password(created.hmac), tokenauth=True)
        assert answer.error_code == ErrorCode.sasl_authentication_failed
        assert "delegation token has expired" in answer.error_message


def test_lifetimes_are_capped_by_the_broker(connect: Any) -> None:
    alice = connect("alice")
    long = _create(alice, max_lifetime_ms=30 * _DAY_MS)
    issue = _epoch_ms(long.issue_timestamp)
    assert _epoch_ms(long.max_timestamp) == issue + 7 * _DAY_MS
    short = _create(alice, max_lifetime_ms=3_600_000)
    issue = _epoch_ms(short.issue_timestamp)
    assert _epoch_ms(short.max_timestamp) == _epoch_ms(short.expiry_timestamp) == \
        issue + 3_600_000
    # A renewal never passes the maximum.
    renewed = _renew(alice, short.hmac, 2 * _DAY_MS)
    assert _epoch_ms(renewed.expiry_timestamp) == issue + 3_600_000


def test_owners_and_principal_types(connect: Any) -> None:
    alice, admin = connect("alice"), connect("admin")
    other = _create(alice, owner="bob")
    assert other.error_code == ErrorCode.delegation_token_authorization_failed
    made = _create(admin, owner="bob")
    assert made.error_code == ErrorCode.none
    assert (made.principal_name, made.token_requester_principal_name) == ("bob", "admin")
    assert made.token_id in _ids(_describe(connect("bob")))
    assert _create(admin, owner="bob", owner_type="Group").error_code == \
        ErrorCode.invalid_principal_type
    assert _create(alice, renewers=("bob",), version=1).error_code == ErrorCode.none


def test_a_token_connection_may_not_manage_tokens(connect: Any, server: BookieProcess) -> None:
    created = _create(connect("alice"))
    with socket.create_connection(kafka_address(server), timeout=DEADLINE_S) as sock:
        answer = _scram(sock, created.token_id, _password(created.hmac), tokenauth=True)
        assert answer.error_code == ErrorCode.none, answer.error_message
        # KIP-368: the session lasts until the token's expiry.
        lifetime_ms = answer.session_lifetime.total_seconds() * 1000
        assert 0 < lifetime_ms <= _DAY_MS
        assert _create(sock).error_code == ErrorCode.delegation_token_request_not_allowed
        assert _describe(sock).error_code == ErrorCode.delegation_token_request_not_allowed
        assert _renew(sock, created.hmac).error_code == \
            ErrorCode.delegation_token_request_not_allowed


def test_scram_refuses_a_wrong_hmac_and_a_user_posing_as_a_token(connect: Any,
                                                                  server: BookieProcess) -> None:
    created = _create(connect("alice"))
    with socket.create_connection(kafka_address(server), timeout=DEADLINE_S) as sock:
        wrong = _scram(sock, created.token_id, _password(secrets.token_bytes(64)),
                       tokenauth=True)
        assert wrong.error_code == ErrorCode.sasl_authentication_failed
        assert read_frame(sock) is None  # closed after the refusal
    with socket.create_connection(kafka_address(server), timeout=DEADLINE_S) as sock:
        unknown = _scram(sock, "no-such-token", "x", tokenauth=True)
        assert unknown.error_code == ErrorCode.sasl_authentication_failed


# -- clients ---------------------------------------------------------------------------


def _librdkafka(server: BookieProcess, token_id: str, token_hmac: bytes) -> dict[str, Any]:
    host, port = kafka_address(server)
    return {"bootstrap.servers": f"{host}:{port}", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": token_id,
            "sasl.password": _password(token_hmac)}


def test_librdkafka_produces_and_consumes_as_the_owner_until_expired(
        connect: Any, server: BookieProcess) -> None:
    alice = connect("alice")
    created = _create(alice)
    settings = _librdkafka(server, created.token_id, created.hmac)
    topic = f"dt-{uuid.uuid4().hex[:8]}"
    librdkafka_round_trip(settings, topic)  # alice's admin grant, through her token
    # Expired: a new client is refused at authentication.
    assert _expire(alice, created.hmac).error_code == ErrorCode.none
    refused: list[KafkaError] = []
    # Any: confluent-kafka types config values as str | int | float; error_cb is a callable.
    config: dict[str, Any] = {**settings, "error_cb": refused.append}
    admin = AdminClient(config)
    deadline = time.monotonic() + DEADLINE_S
    while not refused:
        assert time.monotonic() < deadline, "the client reported no error"
        with contextlib.suppress(Exception):  # the error comes through error_cb
            admin.list_topics(timeout=1)
        admin.poll(0.1)
    assert refused[0].code() == KafkaError._AUTHENTICATION, refused


def test_kafka_python_produces_as_the_owner(connect: Any, server: BookieProcess) -> None:
    created = _create(connect("alice"))
    host, port = kafka_address(server)
    settings: dict[str, Any] = {
        "bootstrap_servers": f"{host}:{port}", "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-256", "sasl_plain_username": created.token_id,
        "sasl_plain_password": _password(created.hmac), "request_timeout_ms": 20000}
    topic = f"dt-kp-{uuid.uuid4().hex[:8]}"
    creator = AdminClient(_librdkafka(server, created.token_id, created.hmac))
    creator.create_topics([NewTopic(topic, 1, 1)])[topic].result(DEADLINE_S)
    producer = KafkaProducer(**settings)
    try:
        written = producer.send(topic, value=b"as alice", partition=0).get(DEADLINE_S)
    finally:
        producer.close()
    assert written.offset == 0


# -- an unauthenticated listener -------------------------------------------------------


def test_a_plaintext_listener_refuses_token_requests(plaintext: BookieProcess) -> None:
    with socket.create_connection(kafka_address(plaintext), timeout=DEADLINE_S) as sock:
        assert _create(sock).error_code == ErrorCode.delegation_token_request_not_allowed
        assert _describe(sock).error_code == ErrorCode.delegation_token_request_not_allowed
        assert _renew(sock, b"x").error_code == ErrorCode.delegation_token_request_not_allowed
        assert _expire(sock, b"x").error_code == ErrorCode.delegation_token_request_not_allowed


def test_an_unreadable_secret_file_stops_the_broker_with_the_flag_named(
        tmp_path: Path) -> None:
    done = run_folio("standalone", "--data-dir", str(tmp_path / "data"), "--port", "0",
                     "--metrics-port", "0", "--kafka-port", "0",
                     "--kafka-delegation-token-secret-file", str(tmp_path / "missing"),
                     timeout_s=120.0)
    assert done.returncode != 0
    assert "--kafka-delegation-token-secret-file: cannot read" in done.stderr, done.stderr
