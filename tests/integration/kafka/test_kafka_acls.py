"""ACL admin through Kafka on Folio's grants, and the grants enforced on both ports.

One secured standalone (token authentication, super-user ``admin``, a
SASL_PLAINTEXT Kafka listener where each client authenticates with PLAIN, a
JWT of its role as the password). kafka-python's ``KafkaAdminClient`` creates,
describes and deletes ACLs; ``folio acl list`` shows them as grants; the SDK
over gRPC and librdkafka over Kafka are allowed or refused by them.
"""

from __future__ import annotations

import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from kafka import KafkaAdminClient
from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from kafka.errors import ClusterAuthorizationFailedError
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

import folio
from ledger.security.tokens import create_token
from tests.support.bookies import BookieProcess, BookieProcesses, run_folio
from tests.support.kafka import kafka_address, raw_request, read_response, sasl_plain
from tests.support.standalone import start_standalone

SECRET = b"kafka-acl-test-secret-0123456789abcdefgh"
DEADLINE_S = 30.0


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BookieProcess]:
    root = tmp_path_factory.mktemp("kafka-acls")
    secret = root / "secret"
    secret.write_bytes(SECRET + b"\n")
    processes = BookieProcesses()
    started = start_standalone(processes, root / "data", "--auth-token-secret-file",
                               str(secret), "--super-users", "admin", "--kafka-port", "0",
                               "--kafka-security-protocol", "SASL_PLAINTEXT",
                               "--kafka-sasl-mechanisms", "PLAIN")
    yield started
    try:
        started.terminate()
    finally:
        processes.kill_all()


def _token(role: str) -> str:
    return create_token(role, SECRET, "HS256")


@pytest.fixture(scope="module")
def admin(secured: BookieProcess) -> Iterator[folio.Client]:
    with folio.Client(secured.address, token=_token("admin"), timeout_s=30) as made:
        yield made


@pytest.fixture
def bootstrap(secured: BookieProcess) -> str:
    host, port = kafka_address(secured)
    return f"{host}:{port}"


def _kafka_admin(bootstrap: str, role: str) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=bootstrap, security_protocol="SASL_PLAINTEXT",
                            sasl_mechanism="PLAIN", sasl_plain_username=role,
                            sasl_plain_password=_token(role), request_timeout_ms=30_000)


def _as(role: str) -> dict[str, str]:
    """librdkafka settings authenticating as ``role``: SASL PLAIN, its JWT as the password."""
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN",
            "sasl.username": role, "sasl.password": _token(role)}


def _acl(role: str, operation: ACLOperation, resource_type: ResourceType, name: str,
         pattern: ACLResourcePatternType = ACLResourcePatternType.LITERAL) -> ACL:
    return ACL(f"User:{role}", "*", operation, ACLPermissionType.ALLOW,
               ResourcePattern(resource_type, name, pattern))


def _all_of(role: str | None) -> ACLFilter:
    return ACLFilter(None if role is None else f"User:{role}", None, ACLOperation.ANY,
                     ACLPermissionType.ANY,
                     ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY))


def _shown(acls: list[ACL]) -> set[tuple[str, str, str, str, str]]:
    return {(acl.principal, acl.resource_pattern.resource_type.name,
             acl.resource_pattern.resource_name, acl.resource_pattern.pattern_type.name,
             acl.operation.name) for acl in acls}


def _folio_acl_list(secured: BookieProcess, role: str) -> list[str]:
    listed = run_folio("acl", "list", "--role", role, "--endpoint", secured.address,
                       "--token", _token("admin"))
    assert listed.returncode == 0, listed.stderr
    return listed.stdout.strip().splitlines()


def _produce_error(bootstrap: str, role: str, topic: str) -> KafkaError | None:
    """Produce one record as ``role``; its delivery error (None: written)."""
    producer = Producer({"bootstrap.servers": bootstrap, **_as(role),
                         "message.timeout.ms": 20_000})
    outcome: list[KafkaError | None] = []
    producer.produce(topic, value=b"v", partition=0,
                     on_delivery=lambda error, _message: outcome.append(error))
    assert producer.flush(DEADLINE_S) == 0
    return outcome[0]


def _consume_one(bootstrap: str, role: str, topic: str, group: str) -> Any:
    """The first message or error a consumer in ``group`` gets as ``role``."""
    consumer = Consumer({"bootstrap.servers": bootstrap, **_as(role), "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    deadline = time.monotonic() + DEADLINE_S
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None:
                return message
    finally:
        consumer.close()
    raise AssertionError(f"{role} got nothing from {topic} in {DEADLINE_S} s")


def test_acls_made_through_kafka_are_the_grants_folio_acl_lists_and_both_ports_enforce(
        secured: BookieProcess, admin: folio.Client, bootstrap: str) -> None:
    admin.create_topic("acl.t")
    kafka_admin = _kafka_admin(bootstrap, "admin")
    try:
        made = kafka_admin.create_acls([
            _acl("reader", ACLOperation.READ, ResourceType.TOPIC, "acl.t"),
            _acl("reader", ACLOperation.READ, ResourceType.GROUP, "acl.g"),
            _acl("writer", ACLOperation.WRITE, ResourceType.TOPIC, "acl.",
                 ACLResourcePatternType.PREFIXED),
            _acl("writer", ACLOperation.WRITE, ResourceType.TRANSACTIONAL_ID, "acl.tx")])
        assert made["failed"] == [] and len(made["succeeded"]) == 4
        assert _folio_acl_list(secured, "reader") == ["reader\tgroup\tacl.g\tconsume",
                                                      "reader\ttopic\tacl.t\tconsume"]
        assert _folio_acl_list(secured, "writer") == ["writer\tgroup\tacl.tx\tproduce",
                                                      "writer\ttopic\tacl.*\tproduce"]
        described, _ = kafka_admin.describe_acls(_all_of(None))
        assert _shown(described) >= {
            ("User:reader", "TOPIC", "acl.t", "LITERAL", "READ"),
            ("User:reader", "GROUP", "acl.g", "LITERAL", "READ"),
            ("User:writer", "TOPIC", "acl.", "PREFIXED", "WRITE"),
            ("User:writer", "TRANSACTIONAL_ID", "acl.tx", "LITERAL", "WRITE")}

        # Kafka: the writer writes, the reader reads in its group; not the other way round.
        assert _produce_error(bootstrap, "writer", "acl.t") is None
        refused = _produce_error(bootstrap, "reader", "acl.t")
        assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
        read = _consume_one(bootstrap, "reader", "acl.t", "acl.g")
        assert read.error() is None and read.value() == b"v"
        stranger = _consume_one(bootstrap, "writer", "acl.t", "acl.g")
        assert stranger.error() is not None
        assert stranger.error().code() in (KafkaError.GROUP_AUTHORIZATION_FAILED,
                                           KafkaError.TOPIC_AUTHORIZATION_FAILED)

        # gRPC: the same grants.
        with folio.Client(secured.address, token=_token("writer"), timeout_s=30) as writer, \
                folio.Client(secured.address, token=_token("reader"), timeout_s=30) as reader:
            with writer.writer("acl.t") as events:
                events.write_event(b"over grpc").result(timeout=30)
            with pytest.raises(folio.PermissionDeniedError, match="lacks produce permission"), \
                    reader.writer("acl.t") as events:
                events.write_event(b"refused").result(timeout=30)
            assert reader.get_topic("acl.t").name == "acl.t"

            # Deleting through Kafka revokes on both ports.
            [(_, removed, error)] = kafka_admin.delete_acls([_all_of("reader")])
            assert error.__name__ == "NoError"
            assert _shown(removed) == {("User:reader", "TOPIC", "acl.t", "LITERAL", "READ"),
                                       ("User:reader", "GROUP", "acl.g", "LITERAL", "READ")}
            assert _folio_acl_list(secured, "reader") == []
            with pytest.raises(folio.PermissionDeniedError, match="no permission on topic"):
                reader.get_topic("acl.t")
        gone = _consume_one(bootstrap, "reader", "acl.t", "acl.g")
        assert gone.error() is not None
    finally:
        kafka_admin.close()


def test_grants_made_with_folio_acl_are_described_through_kafka(
        admin: folio.Client, bootstrap: str) -> None:
    admin.grant_permission("ops-app", "acl.ops.*", ["produce", "consume", "admin"])
    admin.grant_permission("ops-app", "*", ["consume"], kind="group")
    kafka_admin = _kafka_admin(bootstrap, "admin")
    try:
        described, _ = kafka_admin.describe_acls(_all_of("ops-app"))
    finally:
        kafka_admin.close()
    assert _shown(described) == {
        ("User:ops-app", "TOPIC", "acl.ops.", "PREFIXED", "READ"),
        ("User:ops-app", "TOPIC", "acl.ops.", "PREFIXED", "WRITE"),
        ("User:ops-app", "TOPIC", "acl.ops.", "PREFIXED", "ALTER"),
        ("User:ops-app", "GROUP", "*", "LITERAL", "READ")}


def _make(api_key: int, version: int, struct: str | None = None, /, **values: Any) -> Any:
    cls: Any = load_request_schema(api_key, version)
    if struct is not None:
        cls = getattr(sys.modules[cls.__module__], struct)
    return cls(**values)


def _raw(secured: BookieProcess, role: str | None, api_key: int, request: Any) -> Any:
    """``request`` at version 2 over a new connection, authenticated as ``role`` if given."""
    with socket.create_connection(kafka_address(secured), timeout=30) as sock:
        if role is not None:
            sasl_plain(sock, _token(role))
        sock.sendall(raw_request(api_key, 2, 1, request))
        return read_response(sock, api_key, 2)[1]


def _creation(name: str = "acl.x", *, resource_type: int = 2, pattern: int = 3,
              principal: str = "User:u", host: str = "*", operation: int = 3,
              permission: int = 3) -> Any:
    return _make(30, 2, "AclCreation", resource_type=resource_type, resource_name=name,
                 resource_pattern_type=pattern, principal=principal, host=host,
                 operation=operation, permission_type=permission)


def test_what_folio_grants_cannot_hold_is_refused_with_a_message(
        secured: BookieProcess, admin: folio.Client) -> None:
    refused = {
        "DENY": (_creation(permission=2), "only allow"),
        "a host": (_creation(host="10.0.0.1"), "use host '*'"),
        "a cluster ACL": (_creation("kafka-cluster", resource_type=4), "super-users"),
        "DESCRIBE": (_creation(operation=8), "use WRITE, READ, ALTER or ALL"),
        "a group principal": (_creation(principal="Group:ops"), "User:<role>"),
        "a wildcard principal": (_creation(principal="User:*"), "User:<role>"),
        "a star inside": (_creation("acl.*.x"), "'*' nowhere else"),
        "a MATCH pattern": (_creation(pattern=2), "LITERAL or PREFIXED"),
    }
    creations = [creation for creation, _ in refused.values()] + [_creation("acl.ok")]
    response = _raw(secured, "admin", 30, _make(30, 2, creations=tuple(creations)))
    for (what, (_, message)), result in zip(refused.items(), response.results, strict=False):
        assert result.error_code is ErrorCode.invalid_request, what
        assert message in (result.error_message or ""), (what, result.error_message)
    assert response.results[-1].error_code is ErrorCode.none  # the others did not stop it
    assert [g.resource for g in admin.list_permissions("u")] == ["acl.ok"]


def test_only_admin_on_what_an_acl_covers_may_change_it(
        secured: BookieProcess, admin: folio.Client, bootstrap: str) -> None:
    admin.grant_permission("team-admin", "acl.team.*", ["admin"])
    ok = _raw(secured, "team-admin", 30, _make(30, 2, creations=(
        _creation("acl.team.orders", principal="User:team-app"),
        _creation("acl.other", principal="User:team-app"),
        _creation("acl.", pattern=4, principal="User:team-app"))))
    assert [r.error_code for r in ok.results] == [
        ErrorCode.none, ErrorCode.cluster_authorization_failed,
        ErrorCode.cluster_authorization_failed]
    assert "lacks admin permission on topic 'acl.other'" in ok.results[1].error_message
    assert [g.resource for g in admin.list_permissions("team-app")] == ["acl.team.orders"]
    kafka_admin = _kafka_admin(bootstrap, "team-admin")
    try:
        with pytest.raises(ClusterAuthorizationFailedError):
            kafka_admin.describe_acls(_all_of(None))
        admin.grant_permission("team-app", "acl.elsewhere", ["consume"])
        [(_, removed, error)] = kafka_admin.delete_acls([_all_of("team-app")])
        assert error is ClusterAuthorizationFailedError and removed == []
    finally:
        kafka_admin.close()
    assert sorted(g.resource for g in admin.list_permissions("team-app")) == [
        "acl.elsewhere", "acl.team.orders"]


def test_without_token_authentication_acl_calls_answer_security_disabled(
        tmp_path: Path) -> None:
    processes = BookieProcesses()
    try:
        plain = start_standalone(processes, tmp_path / "data", "--kafka-port", "0")
        response = _raw(plain, None, 29, _make(
            29, 2, resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
            principal_filter=None, host_filter=None, operation=1, permission_type=1))
        assert response.error_code is ErrorCode.security_disabled
        assert "token authentication is off" in response.error_message
        plain.terminate()
    finally:
        processes.kill_all()




def test_librdkafka_creates_describes_and_deletes_acls(
        secured: BookieProcess, bootstrap: str) -> None:
    from confluent_kafka.admin import (  # noqa: PLC0415
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
    )
    from confluent_kafka.admin import ResourceType as Kind  # noqa: PLC0415

    client = AdminClient({"bootstrap.servers": bootstrap, **_as("admin")})
    binding = AclBinding(Kind.TOPIC, "acl.rd.", ResourcePatternType.PREFIXED, "User:rd-app",
                         "*", AclOperation.WRITE, AclPermissionType.ALLOW)
    for future in client.create_acls([binding]).values():
        assert future.result(timeout=DEADLINE_S) is None
    assert _folio_acl_list(secured, "rd-app") == ["rd-app\ttopic\tacl.rd.*\tproduce"]
    # None matches any name and any host (confluent-kafka's docs; its annotations say str).
    everything = AclBindingFilter(
        Kind.ANY, None, ResourcePatternType.ANY, "User:rd-app", None,  # type: ignore[arg-type]
        AclOperation.ANY, AclPermissionType.ANY)
    described = client.describe_acls(everything).result(timeout=DEADLINE_S)
    assert [(b.name, b.resource_pattern_type, b.operation) for b in described] == [
        ("acl.rd.", ResourcePatternType.PREFIXED, AclOperation.WRITE)]
    [deleted] = [f.result(timeout=DEADLINE_S)
                 for f in client.delete_acls([everything]).values()]
    assert [b.name for b in deleted] == ["acl.rd."]
    assert _folio_acl_list(secured, "rd-app") == []
