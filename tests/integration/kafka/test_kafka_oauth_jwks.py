"""OAUTHBEARER with an identity provider's JWTs (KIP-768), on a real listener.

A stand-in provider (``tests.support.oidc``: RSA keys, their JWKS) serves its
key set from a real HTTPS server on a loopback port 0, its certificate from a
trustme CA (``tests.support.certs``). Two ``folio standalone`` processes for
the module:

- ``both``: Folio's own token key (super-user ``admin``) and the provider's
  JWKS over https, trusted through ``--kafka-oauth-jwks-ca-file`` (the CA is
  no system CA: without the file no fetch would pass), audience ``kafka``,
  issuer ``https://idp.example``: a provider token (with ``kid``) and a Folio
  token (without) both work, on the Kafka port and on the gRPC port;
- ``file_only``: the provider's JWKS in a ``file:`` URL and no Folio key, a
  provider role ``boss`` as super-user, scope ``folio`` required: the grants
  apply to provider roles on both ports (``app`` is refused until granted),
  and a token without the scope is refused on both.

librdkafka (``oauth_cb`` returning the provider's token) and kafka-python
(a token provider) produce and consume; every bad token is refused,
asserted on the client's error or on a raw SASL exchange's error message;
a rotated key is found by a refetch; the endpoint down keeps the held keys
serving and says why a new key fails.
"""

from __future__ import annotations

import contextlib
import socket
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import grpc
import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaPythonPartition
from kafka.net.sasl.oauth import AbstractTokenProvider
from kio.index import load_request_schema

import folio
from folio.api.v1 import admin_pb2
from ledger.security.tokens import create_token
from tests.support.bookies import BookieProcess, BookieProcesses
from tests.support.certs import Pki
from tests.support.kafka import kafka_address, raw_request, read_response
from tests.support.kafka_clients import librdkafka_round_trip
from tests.support.oidc import ISSUER, JwksServer, Provider, hs256_with_public_key, unsigned
from tests.support.standalone import start_standalone
from tests.support.wait import wait_for

DEADLINE_S = 60.0
_SECRET = b"kafka-oauth-jwks-test-secret-0123456789abcdef"


@dataclass(frozen=True)
class Listener:
    server: BookieProcess
    bootstrap: str

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.bootstrap.rsplit(":", 1)
        return host, int(port)


@pytest.fixture(scope="module")
def provider() -> Provider:
    made = Provider()
    made.add_rsa("k1")
    return made


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return Pki(tmp_path_factory.mktemp("idp-ca"))


@pytest.fixture(scope="module")
def jwks(provider: Provider, pki: Pki) -> Iterator[JwksServer]:
    served = pki.server()
    server = JwksServer(provider, tls=(served.cert, served.key))
    yield server
    server.close()


@pytest.fixture(scope="module")
def processes() -> Iterator[BookieProcesses]:
    made = BookieProcesses()
    yield made
    made.kill_all()


def _oauth(*, url: str) -> list[str]:
    return ["--kafka-port", "0", "--kafka-security-protocol", "SASL_PLAINTEXT",
            "--kafka-sasl-mechanisms", "OAUTHBEARER", "--kafka-oauth-jwks-url", url,
            "--kafka-oauth-expected-audience", "kafka,other-audience",
            "--kafka-oauth-expected-issuer", ISSUER]


@pytest.fixture(scope="module")
def both(processes: BookieProcesses, jwks: JwksServer, pki: Pki,
         tmp_path_factory: pytest.TempPathFactory) -> Listener:
    root = tmp_path_factory.mktemp("both")
    secret = root / "secret"
    secret.write_bytes(_SECRET + b"\n")
    server = start_standalone(processes, root / "data", "--auth-token-secret-file", str(secret),
                              "--super-users", "admin", *_oauth(url=jwks.url),
                              "--kafka-oauth-jwks-ca-file", str(pki.ca))
    with folio.Client(server.address, token=create_token("admin", _SECRET, "HS256"),
                      timeout_s=30) as admin:
        admin.grant_permission("app", "*", ["produce", "consume", "admin"])
        admin.grant_permission("app", "*", ["consume"], kind="group")
    host, port = kafka_address(server)
    return Listener(server, f"{host}:{port}")


@pytest.fixture(scope="module")
def file_only(processes: BookieProcesses, provider: Provider,
              tmp_path_factory: pytest.TempPathFactory) -> Listener:
    root = tmp_path_factory.mktemp("file-only")
    keys = root / "jwks.json"
    keys.write_bytes(provider.jwks())
    server = start_standalone(processes, root / "data", "--super-users", "boss",
                              *_oauth(url=keys.as_uri()), "--kafka-oauth-required-scopes",
                              "folio")
    host, port = kafka_address(server)
    return Listener(server, f"{host}:{port}")


def _settings(listener: Listener, token: str) -> dict[str, Any]:
    return {"bootstrap.servers": listener.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "OAUTHBEARER",
            "oauth_cb": lambda _config: (token, time.time() + 600)}


def _client_errors(settings: dict[str, Any]) -> list[KafkaError]:
    """The errors librdkafka reports (error_cb) while it tries to reach the broker."""
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


def _sasl(listener: Listener, token: str) -> tuple[int, str]:
    """(error code, error message) of a raw OAUTHBEARER exchange with ``token``."""
    with socket.create_connection(listener.address, timeout=30) as sock:
        handshake_cls: Any = load_request_schema(17, 1)
        sock.sendall(raw_request(17, 1, 0, handshake_cls(mechanism="OAUTHBEARER")))
        _, handshake = read_response(sock, 17, 1)
        assert handshake.error_code.value == 0, handshake
        authenticate_cls: Any = load_request_schema(36, 2)
        message = f"n,,\x01auth=Bearer {token}\x01\x01".encode()
        sock.sendall(raw_request(36, 2, 1, authenticate_cls(auth_bytes=message)))
        _, answer = read_response(sock, 36, 2)
        return answer.error_code.value, answer.error_message or ""


# -- accepted ------------------------------------------------------------------------


def test_provider_token_produces_and_consumes(both: Listener, provider: Provider,
                                              jwks: JwksServer) -> None:
    librdkafka_round_trip(_settings(both, provider.token("k1")), "oidc-rd")
    assert jwks.requests >= 1


def test_folio_tokens_keep_working(both: Listener) -> None:
    token = create_token("app", _SECRET, "HS256", expiry_s=600)
    librdkafka_round_trip(_settings(both, token), "oidc-folio")


class _Tokens(AbstractTokenProvider):  # type: ignore[misc]
    def __init__(self, token: str) -> None:
        super().__init__()
        self._token = token

    def token(self) -> str:
        return self._token


def test_kafka_python_with_a_provider_token(both: Listener, provider: Provider) -> None:
    admin = AdminClient(_settings(both, provider.token("k1")))
    admin.create_topics([NewTopic("oidc-kp", 1, 1)])["oidc-kp"].result(DEADLINE_S)
    settings: dict[str, Any] = {
        "bootstrap_servers": both.bootstrap, "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "OAUTHBEARER", "request_timeout_ms": 20000,
        "sasl_oauth_token_provider": _Tokens(provider.token("k1"))}
    producer = KafkaProducer(**settings)
    value = uuid.uuid4().bytes
    try:
        producer.send("oidc-kp", value=value, partition=0).get(DEADLINE_S)
    finally:
        producer.close()
    consumer = KafkaConsumer(**settings, enable_auto_commit=False)
    values: list[bytes] = []
    try:
        consumer.assign([KafkaPythonPartition("oidc-kp", 0)])
        consumer.seek_to_beginning()
        deadline = time.monotonic() + DEADLINE_S
        while value not in values and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                values.extend(record.value for record in records)
    finally:
        consumer.close()
    assert value in values


def test_second_audience_is_accepted(both: Listener, provider: Provider) -> None:
    assert _sasl(both, provider.token("k1", aud="other-audience")) == (0, "")


# -- refused -------------------------------------------------------------------------


def test_wrong_audience_is_refused_by_the_client(both: Listener, provider: Provider) -> None:
    errors = _client_errors(_settings(both, provider.token("k1", aud="someone-else")))
    assert errors[0].code() == KafkaError._AUTHENTICATION, errors
    assert "audience is not one of kafka, other-audience" in errors[0].str()


@pytest.mark.parametrize(("case", "shown"), [
    ("issuer", "the token's issuer is not https://idp.example"),
    ("expired", "the token has expired"),
    ("no_exp", "the token has no 'exp' claim"),
    ("unknown_kid", "the token's key id 'never-published' is not in the JWKS of https://"),
    ("alg_none", "the token's algorithm 'none' is not accepted"),
    ("hs256_public_key", "the token's algorithm 'HS256' is not accepted"),
    ("forged", "the token's signature does not verify with its JWKS key"),
])
def test_bad_tokens_are_refused(both: Listener, provider: Provider, case: str,
                                shown: str) -> None:
    if case == "issuer":
        token = provider.token("k1", iss="https://evil.example")
    elif case == "expired":
        token = provider.token("k1", exp=int(time.time()) - 3600)
    elif case == "no_exp":
        token = provider.token("k1", exp=None)
    elif case == "unknown_kid":
        provider.add_rsa("never-published", publish=False)
        token = provider.token("never-published")
    elif case == "alg_none":
        token = unsigned("k1")
    elif case == "hs256_public_key":
        token = hs256_with_public_key(provider, "k1")
    else:
        impostor = Provider()
        impostor.add_rsa("k1")
        token = impostor.token("k1", sub="admin")
    code, message = _sasl(both, token)
    assert code == 58, (code, message)  # SASL_AUTHENTICATION_FAILED
    assert message.startswith("authentication failed: ")
    assert shown in message
    assert token not in message


def test_expired_token_is_refused_by_the_client(both: Listener, provider: Provider) -> None:
    errors = _client_errors(_settings(both, provider.token("k1", exp=int(time.time()) - 3600)))
    assert errors[0].code() == KafkaError._AUTHENTICATION, errors
    assert "expired" in errors[0].str()


# -- rotation and an endpoint down ---------------------------------------------------


def test_rotated_key_is_found_by_a_refetch(both: Listener, provider: Provider,
                                           jwks: JwksServer) -> None:
    assert _sasl(both, provider.token("k1")) == (0, "")  # the set is held
    provider.add_rsa("k2")  # the provider rotates: k2 published
    token = provider.token("k2")
    # An unknown kid refetches at once unless a fetch ran within the last second.
    wait_for(lambda: _sasl(both, token) == (0, ""), "a token of the new key accepted")
    librdkafka_round_trip(_settings(both, token), "oidc-rotated")


def test_endpoint_down_keeps_the_held_keys(both: Listener, provider: Provider,
                                           jwks: JwksServer) -> None:
    assert _sasl(both, provider.token("k1")) == (0, "")
    provider.down = True
    try:
        provider.add_rsa("k3")  # published, but the endpoint answers 503
        token = provider.token("k3")
        refused: list[str] = []

        def says_why() -> bool:
            code, message = _sasl(both, token)
            assert code == 58, (code, message)
            refused.append(message)
            return "the last fetch failed: HTTP Error 503" in message

        wait_for(says_why, "a refusal naming the failed fetch")
        assert "key id 'k3' is not in the JWKS" in refused[-1]
        assert _sasl(both, provider.token("k1")) == (0, "")  # held keys still serve
    finally:
        provider.down = False
    wait_for(lambda: _sasl(both, token) == (0, ""), "the new key once the endpoint is back")


# -- a file: JWKS, provider roles under the grants -------------------------------------


def test_file_jwks_and_grants_apply_to_provider_roles(file_only: Listener,
                                                      provider: Provider) -> None:
    boss = _settings(file_only, provider.token("k1", sub="boss", scope="openid folio"))
    librdkafka_round_trip(boss, "oidc-file")  # a super-user
    app_token = provider.token("k1", scope="folio")
    app = _settings(file_only, app_token)
    assert _produce(app, "oidc-file") == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    with folio.Client(file_only.server.address, token=app_token, timeout_s=30) as denied, \
            pytest.raises(folio.PermissionDeniedError, match="oidc-file"):
        denied.writer("oidc-file").write_event(b"x").result(timeout=30)
    # The super-user grants through the gRPC port, with the provider's token.
    with folio.Client(file_only.server.address,
                      token=provider.token("k1", sub="boss", scope=["folio"]),
                      timeout_s=30) as admin:
        admin.grant_permission("app", "oidc-file", ["produce"])
    # The grants reach the listener through the store's watch: wait for them.
    wait_for(lambda: _produce(app, "oidc-file") == [], "app's produce allowed once granted")
    with folio.Client(file_only.server.address, token=app_token, timeout_s=30) as allowed, \
            allowed.writer("oidc-file") as writer:
        writer.write_event(b"by-grpc").result(timeout=30)


def _produce(settings: dict[str, Any], topic: str) -> list[int]:
    """The error codes of one record produced by a new producer (empty: delivered)."""
    producer = Producer({**settings, "linger.ms": 0, "message.timeout.ms": 10000})
    errors: list[Any] = []
    try:
        producer.produce(topic, value=b"x",
                         on_delivery=lambda error, _m: errors.append(error) if error else None)
    except KafkaException as error:
        return [error.args[0].code()]
    producer.flush(DEADLINE_S)
    return [error.code() for error in errors]


def test_file_jwks_no_folio_key_refuses_folio_tokens(file_only: Listener) -> None:
    token = create_token("boss", _SECRET, "HS256", expiry_s=600)
    code, message = _sasl(file_only, token)
    assert code == 58
    assert "the token's algorithm 'HS256' is not accepted" in message
    code_grpc, details = _grpc(file_only, token)
    assert code_grpc is grpc.StatusCode.UNAUTHENTICATED
    assert details.startswith("the token's algorithm 'HS256' is not accepted")


# -- the gRPC port -------------------------------------------------------------------


def _grpc(listener: Listener, token: str | None) -> tuple[grpc.StatusCode, str]:
    """(status, details) of a ListTopics call on the gRPC port with ``token``."""
    metadata = (("authorization", f"Bearer {token}"),) if token is not None else None
    with grpc.insecure_channel(listener.server.address) as channel:
        list_topics: Any = channel.unary_unary(
            f"/{admin_pb2.DESCRIPTOR.services_by_name['Admin'].full_name}/ListTopics",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=admin_pb2.ListTopicsResponse.FromString)
        try:
            list_topics(admin_pb2.ListTopicsRequest(), metadata=metadata, timeout=30)
        except grpc.RpcError as error:
            return error.code(), error.details() or ""
    return grpc.StatusCode.OK, ""


def test_sdk_writes_and_reads_with_a_provider_token(both: Listener, provider: Provider) -> None:
    with folio.Client(both.server.address, token=create_token("admin", _SECRET, "HS256"),
                      timeout_s=30) as admin:
        admin.create_topic("oidc-grpc", segments=1)
    with folio.Client(both.server.address, token=provider.token("k1"), timeout_s=30) as app:
        with app.writer("oidc-grpc") as writer:
            writer.write_event(b"via-grpc", routing_key="k").result(timeout=30)
        reader = app.reader("oidc-grpc", "earliest")
        try:
            event = reader.read_next(timeout=30)
            assert event is not None and event.payload == b"via-grpc"
        finally:
            reader.close()


@pytest.mark.parametrize(("case", "shown"), [
    ("expired", "the token has expired"),
    ("issuer", "the token's issuer is not https://idp.example"),
    ("unknown_kid", "the token's key id 'grpc-never-published' is not in the JWKS of https://"),
    ("forged", "the token's signature does not verify with its JWKS key"),
    ("none", "no token: send 'authorization: Bearer <token>' call metadata"),
])
def test_bad_tokens_are_unauthenticated_on_the_grpc_port(both: Listener, provider: Provider,
                                                          case: str, shown: str) -> None:
    token: str | None
    if case == "expired":
        token = provider.token("k1", exp=int(time.time()) - 3600)
    elif case == "issuer":
        token = provider.token("k1", iss="https://evil.example")
    elif case == "unknown_kid":
        provider.add_rsa("grpc-never-published", publish=False)
        token = provider.token("grpc-never-published")
    elif case == "forged":
        impostor = Provider()
        impostor.add_rsa("k1")
        token = impostor.token("k1", sub="admin")
    else:
        token = None
    code, details = _grpc(both, token)
    assert code is grpc.StatusCode.UNAUTHENTICATED, (code, details)
    assert details.startswith(shown), details
    assert token is None or token not in details


def test_one_key_set_serves_both_ports(both: Listener, provider: Provider,
                                       jwks: JwksServer) -> None:
    """A key the gRPC port's check fetched is held for the Kafka port: one verifier."""
    assert _grpc(both, provider.token("k1")) == (grpc.StatusCode.OK, "")
    provider.add_rsa("shared")
    token = provider.token("shared")
    wait_for(lambda: _grpc(both, token) == (grpc.StatusCode.OK, ""),
             "the new key found by the gRPC port's refetch")
    fetched = jwks.requests
    assert _sasl(both, token) == (0, "")
    assert jwks.requests == fetched  # no fetch of its own: the same held set


def test_endpoint_down_on_the_grpc_port(both: Listener, provider: Provider) -> None:
    assert _grpc(both, provider.token("k1")) == (grpc.StatusCode.OK, "")
    provider.down = True
    try:
        provider.add_rsa("grpc-k")
        token = provider.token("grpc-k")

        def says_why() -> bool:
            code, details = _grpc(both, token)
            assert code is grpc.StatusCode.UNAUTHENTICATED, (code, details)
            return "the last fetch failed: HTTP Error 503" in details

        wait_for(says_why, "an UNAUTHENTICATED naming the failed fetch")
        assert _grpc(both, provider.token("k1")) == (grpc.StatusCode.OK, "")  # held keys
    finally:
        provider.down = False
    wait_for(lambda: _grpc(both, token) == (grpc.StatusCode.OK, ""),
             "the new key once the endpoint is back")


def test_a_required_scope_is_checked_on_both_ports(file_only: Listener,
                                                   provider: Provider) -> None:
    lacking = provider.token("k1", sub="boss", scope="openid kafka")
    why = "the token lacks the required scope(s) folio (its 'scope' claim holds: kafka openid)"
    assert _sasl(file_only, lacking) == (58, f"authentication failed: {why}")
    assert _grpc(file_only, lacking) == (grpc.StatusCode.UNAUTHENTICATED, why)
    with folio.Client(file_only.server.address, token=lacking, timeout_s=30) as client, \
            pytest.raises(folio.UnauthenticatedError, match="lacks the required scope"):
        client.list_topics()
    scoped = provider.token("k1", sub="boss", scope="openid folio")
    assert _sasl(file_only, scoped) == (0, "")
    assert _grpc(file_only, scoped) == (grpc.StatusCode.OK, "")
