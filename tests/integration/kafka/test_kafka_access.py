"""Kafka permissions: every row of ``broker.kafka.access.KAFKA_TABLE`` over a real socket.

One secured standalone (token authentication, super-user ``admin``, a
SASL_PLAINTEXT Kafka listener): each connection authenticates with SASL PLAIN,
a JWT of its role as the password, as a client would. For each
requirement of each row, the API is called by a role holding every other
permission of the row but that one (the row's Kafka error code comes back)
and by a role granted all of them (no authorisation error). The grants are
made over gRPC, so the same grants are seen by both front ends. Then: lists
(Metadata of all topics, ListGroups) show only what the role may see and an
unauthenticated connection is closed before it sees anything; librdkafka's idempotent and
transactional producers are refused, then allowed, as Kafka's ACL model says.
"""

from __future__ import annotations

import datetime
import itertools
import socket
import time
from collections.abc import Iterator
from dataclasses import fields, is_dataclass
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from kio.schema.errors import ErrorCode

import folio
from broker.kafka import access
from broker.kafka.access import KAFKA_TABLE, Requirement
from broker.kafka.apis import dispatch_table
from ledger.security.tokens import create_token
from tests.integration.kafka.access_requests import (
    GROUP,
    REQUESTS,
    TOPIC,
    TXN_ID,
    req,
    topic_offsets,
)
from tests.support.bookies import BookieProcess, BookieProcesses
from tests.support.kafka import kafka_address, raw_request, read_frame, read_response, sasl_plain
from tests.support.standalone import start_standalone

SECRET = b"kafka-access-test-secret-0123456789abcdef"
_AUTH_FAILED = {ErrorCode.topic_authorization_failed, ErrorCode.group_authorization_failed,
                ErrorCode.cluster_authorization_failed,
                ErrorCode.transactional_id_authorization_failed}
_SECOND = datetime.timedelta(seconds=1)


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BookieProcess]:
    root = tmp_path_factory.mktemp("kafka-access")
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


@pytest.fixture(scope="module")
def admin(secured: BookieProcess) -> Iterator[folio.Client]:
    with folio.Client(secured.address, token=_token("admin"), timeout_s=30) as made:
        made.create_topic(TOPIC)
        yield made


def _token(role: str) -> str:
    return create_token(role, SECRET, "HS256")


def _connect(address: tuple[str, int], role: str | None) -> socket.socket:
    """A connection to the Kafka port authenticated as ``role`` (None: not authenticated)."""
    sock = socket.create_connection(address, timeout=30)
    if role is not None:
        try:
            sasl_plain(sock, _token(role))
        except BaseException:
            sock.close()
            raise
    return sock


# ------------------------------------------------------------------ requests


#: What a role is granted to meet each requirement: (kind, resource, action); None: a super-user.
GRANTS: dict[Requirement, tuple[str, str, str] | None] = {
    access.TOPIC_PRODUCE: ("topic", TOPIC, "produce"),
    access.TOPIC_CONSUME: ("topic", TOPIC, "consume"),
    access.TOPIC_LOOKUP: ("topic", TOPIC, "consume"),
    access.TOPIC_ADMIN: ("topic", "acc.*", "admin"),
    access.GROUP_CONSUME: ("group", GROUP, "consume"),
    access.GROUP_LOOKUP: ("group", GROUP, "consume"),
    access.GROUP_ADMIN: ("group", GROUP, "admin"),
    access.TXN_PRODUCE: ("group", TXN_ID, "produce"),
    access.IDEMPOTENT: ("topic", TOPIC, "produce"),
    access.ACL_ADMIN: ("topic", TOPIC, "admin"),
    access.CLUSTER: None,
}

_ROLES = itertools.count()


def _codes(value: Any) -> set[ErrorCode]:
    """Every error code anywhere in a decoded response."""
    if isinstance(value, ErrorCode):
        return {value}
    if isinstance(value, tuple):
        return set().union(*(_codes(item) for item in value)) if value else set()
    if is_dataclass(value):
        return set().union(*(_codes(getattr(value, f.name)) for f in fields(value)))
    return set()


def _call(address: tuple[str, int], role: str, api: str, requirement: Requirement) -> Any:
    api_key, version, make = REQUESTS[api]
    with _connect(address, role) as sock:
        sock.sendall(raw_request(api_key, version, 7, make(requirement)))
        correlation_id, response = read_response(sock, api_key, version)
    assert correlation_id == 7
    return response


def _role_with(client: folio.Client, requirements: list[Requirement]) -> str:
    """A new role granted ``requirements`` (the super-user if one needs the cluster)."""
    if any(GRANTS[r] is None for r in requirements):
        return "admin"
    role = f"role-{next(_ROLES)}"
    for requirement in requirements:
        grant = GRANTS[requirement]
        assert grant is not None
        kind, resource, action = grant
        client.grant_permission(role, resource, [action], kind=kind)  # type: ignore[arg-type]
    return role


def test_every_served_api_has_a_row_and_a_request() -> None:
    served = {row.name for row in dispatch_table().rows()}
    assert served == set(KAFKA_TABLE), "rows missing from broker/kafka/access.py's KAFKA_TABLE"
    assert served == set(REQUESTS)
    assert {r for row in KAFKA_TABLE.values() for r in row} <= set(GRANTS)


_CASES = [(api, requirement) for api, row in sorted(KAFKA_TABLE.items())
          for requirement in row]


@pytest.mark.parametrize(("api", "requirement"), _CASES,
                         ids=[f"{api}-{r.need.value}-{r.resource.value}" for api, r in _CASES])
def test_each_row_refuses_without_and_allows_with_its_permission(
        secured: BookieProcess, admin: folio.Client, api: str, requirement: Requirement) -> None:
    address = kafka_address(secured)
    others = [r for r in KAFKA_TABLE[api] if r is not requirement and GRANTS[r] is not None]
    without = _role_with(admin, others)
    refused = _codes(_call(address, without, api, requirement))
    assert requirement.refused in refused, (api, requirement, refused)
    allowed = _codes(_call(address, _role_with(admin, list(KAFKA_TABLE[api])), api,
                           requirement))
    assert not allowed & _AUTH_FAILED, (api, requirement, allowed)
    # A super-user passes every check.
    assert not _codes(_call(address, "admin", api, requirement)) & _AUTH_FAILED


def _metadata_request(names: list[str] | None, *, auto_create: bool = True) -> Any:
    return req(3, 9, topics=None if names is None else tuple(
        req(3, 9, "MetadataRequestTopic", name=name) for name in names),
        include_cluster_authorized_operations=False, include_topic_authorized_operations=False,
        allow_auto_topic_creation=auto_create)


def _metadata(address: tuple[str, int], role: str, names: list[str] | None, *,
              auto_create: bool = True) -> Any:
    with _connect(address, role) as sock:
        sock.sendall(raw_request(3, 9, 1, _metadata_request(names, auto_create=auto_create)))
        return read_response(sock, 3, 9)[1]


def test_lists_show_only_what_the_role_may_see_and_names_do_not_leak(
        secured: BookieProcess, admin: folio.Client) -> None:
    address = kafka_address(secured)
    admin.create_topic("seen.a")
    admin.create_topic("hidden.b")
    admin.grant_permission("browser", "seen.*", ["consume"])
    listed = {topic.name for topic in _metadata(address, "browser", None).topics}
    assert listed == {"seen.a"}
    assert {"seen.a", "hidden.b", TOPIC} <= {t.name for t in _metadata(address, "admin",
                                                                       None).topics}
    named = {topic.name: topic.error_code for topic in _metadata(
        address, "browser", ["seen.a", "hidden.b", "never.made", "seen.never"]).topics}
    # An unknown topic is refused like a hidden one (as Kafka answers an unauthorized
    # role), and so is one the role may see but not create when the request allows
    # auto-creation (Kafka: no CREATE permission); without that it is unknown.
    assert named == {"seen.a": ErrorCode.none,
                     "hidden.b": ErrorCode.topic_authorization_failed,
                     "never.made": ErrorCode.topic_authorization_failed,
                     "seen.never": ErrorCode.topic_authorization_failed}
    [unknown] = _metadata(address, "browser", ["seen.never"], auto_create=False).topics
    with _connect(address, "browser") as sock:  # DescribeTopicPartitions lists as Metadata
        sock.sendall(raw_request(75, 0, 1, req(75, 0, topics=())))
        assert {t.name for t in read_response(sock, 75, 0)[1].topics} == {"seen.a"}
    assert unknown.error_code == ErrorCode.unknown_topic_or_partition
    assert "seen.never" not in {t.name for t in admin.list_topics()}
    # An unauthenticated connection has no role: it is closed, never answered.
    with _connect(address, None) as sock:
        sock.sendall(raw_request(3, 9, 1, _metadata_request(None)))
        assert read_frame(sock) is None


def test_list_groups_shows_only_the_groups_the_role_has_a_permission_on(
        secured: BookieProcess, admin: folio.Client) -> None:
    address = kafka_address(secured)
    admin.grant_permission("joiner", "team.*", ["consume"], kind="group")
    for group in ("team.one", "other.two"):  # a commit without members makes the group
        commit = req(8, 8, group_id=group, member_id="", topics=topic_offsets(
            8, 8, "OffsetCommitRequestTopic", "OffsetCommitRequestPartition"))
        with _connect(address, "admin") as sock:
            sock.sendall(raw_request(8, 8, 1, commit))
            assert _codes(read_response(sock, 8, 8)[1]) == {ErrorCode.none}

    def listed(role: str) -> set[str]:
        with _connect(address, role) as sock:
            sock.sendall(raw_request(16, 4, 1, req(16, 4)))
            return {group.group_id for group in read_response(sock, 16, 4)[1].groups}

    assert {"team.one", "other.two"} <= listed("admin")
    assert listed("joiner") == {"team.one"}
    assert listed("stranger") == set()


def _bootstrap(secured: BookieProcess) -> str:
    host, port = kafka_address(secured)
    return f"{host}:{port}"


def _as(role: str) -> dict[str, str]:
    """librdkafka settings authenticating as ``role``: SASL PLAIN, its JWT as the password."""
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN",
            "sasl.username": role, "sasl.password": _token(role)}


def _idempotent_produce(bootstrap: str, role: str, topic: str) -> list[int]:
    """Produce one record idempotently as ``role``: the Kafka error codes seen (none: written).

    No delivery callback: librdkafka raises a fatal error (no producer id) through the
    next call, and a Python callback would run with that exception pending.
    """
    producer = Producer({"bootstrap.servers": bootstrap, **_as(role),
                         "enable.idempotence": True, "message.timeout.ms": 15_000})
    try:
        producer.produce(topic, value=b"once", partition=0)
        left = producer.flush(30)
    except KafkaException as error:
        return [error.args[0].code()]
    finally:
        del producer
    assert left == 0, "the record was neither written nor refused"
    return []


def test_librdkafka_idempotent_producer_needs_produce_on_some_topic(
        secured: BookieProcess, admin: folio.Client) -> None:
    admin.create_topic("idem.t")
    bootstrap = _bootstrap(secured)
    # It may see the topic (consume), but produce nowhere: no producer id.
    admin.grant_permission("idem-none", "idem.t", ["consume"])
    assert KafkaError.CLUSTER_AUTHORIZATION_FAILED in _idempotent_produce(
        bootstrap, "idem-none", "idem.t")
    admin.grant_permission("idem-ok", "idem.t", ["produce"])
    assert _idempotent_produce(bootstrap, "idem-ok", "idem.t") == []


def test_librdkafka_transactional_producer_needs_produce_on_its_transactional_id(
        secured: BookieProcess, admin: folio.Client) -> None:
    admin.create_topic("txp.t")
    bootstrap = _bootstrap(secured)
    for role in ("tx-none", "tx-ok"):
        admin.grant_permission(role, "txp.t", ["produce"])
    settings = {"bootstrap.servers": bootstrap, "transactional.id": "txp.app",
                "transaction.timeout.ms": 30_000}
    refused = Producer({**settings, **_as("tx-none")})
    with pytest.raises(KafkaException) as failed:
        refused.init_transactions(30)
    assert failed.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    admin.grant_permission("tx-ok", "txp.app", ["produce"], kind="group")
    producer = Producer({**settings, **_as("tx-ok")})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce("txp.t", value=b"committed", partition=0)
    producer.commit_transaction(30)
    consumer = Consumer({"bootstrap.servers": bootstrap, **_as("admin"),
                         "group.id": "txp.check", "isolation.level": "read_committed",
                         "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition("txp.t", 0, 0)])
    try:
        deadline = time.monotonic() + 30
        message = None
        while message is None and time.monotonic() < deadline:
            message = consumer.poll(0.5)
        assert message is not None and message.error() is None
        assert message.value() == b"committed"
    finally:
        consumer.close()
        del refused, producer  # librdkafka handles: gone before the broker stops


def test_add_partitions_to_txn_v5_needs_the_cluster(
        secured: BookieProcess, admin: folio.Client) -> None:
    """The brokers' form (KIP-890) asks Kafka's ClusterAction: here a super-user's."""
    role = _role_with(admin, [access.TXN_PRODUCE, access.TOPIC_PRODUCE])
    request = req(24, 5, transactions=(req(
        24, 5, "AddPartitionsToTxnTransaction", transactional_id=TXN_ID, producer_id=999_999,
        producer_epoch=0, verify_only=True, topics=(
            req(24, 5, "AddPartitionsToTxnTopic", name=TOPIC, partitions=(0,)),)),))
    answers = {}
    for who in (role, "admin"):
        with _connect(kafka_address(secured), who) as sock:
            sock.sendall(raw_request(24, 5, 7, request))
            answers[who] = read_response(sock, 24, 5)[1]
    assert (answers[role].error_code, answers[role].results_by_transaction) == (
        ErrorCode.cluster_authorization_failed, ())
    assert answers["admin"].error_code == ErrorCode.none
    assert _codes(answers["admin"].results_by_transaction) == {
        ErrorCode.invalid_producer_id_mapping}


def _share_fetch(address: tuple[str, int], role: str, group: str, member: str,
                 topic_id: Any) -> Any:
    request = req(78, 1, group_id=group, member_id=member, share_session_epoch=0,
                  max_wait=datetime.timedelta(0), min_bytes=1, max_bytes=1024, max_records=1,
                  batch_size=1, topics=(req(78, 1, "FetchTopic", topic_id=topic_id, partitions=(
                      req(78, 1, "FetchPartition", partition_index=0,
                          acknowledgement_batches=()),)),), forgotten_topics_data=())
    with _connect(address, role) as sock:
        sock.sendall(raw_request(78, 1, 3, request))
        return read_response(sock, 78, 1)[1]


def test_share_fetch_refuses_a_topic_not_consumable(secured: BookieProcess,
                                                    admin: folio.Client) -> None:
    """ShareFetch's per-partition TOPIC_CONSUME check (its row names the group's only:
    a share request names topics by id, which the table's static requests cannot)."""
    address = kafka_address(secured)
    group, member = "acc.share", "acc-share-member"
    with _connect(address, "admin") as sock:
        sock.sendall(raw_request(3, 12, 1, req(
            3, 12, topics=(req(3, 12, "MetadataRequestTopic", topic_id=None, name=TOPIC),),
            allow_auto_topic_creation=False, include_topic_authorized_operations=False)))
        [described] = read_response(sock, 3, 12)[1].topics
        sock.sendall(raw_request(76, 1, 2, req(76, 1, group_id=group, member_id=member,
                                               member_epoch=0, rack_id=None,
                                               subscribed_topic_names=(TOPIC,))))
        joined = read_response(sock, 76, 1)[1]
    assert joined.error_code == ErrorCode.none
    role = f"role-{next(_ROLES)}"
    admin.grant_permission(role, group, ["consume"], kind="group")
    refused = _share_fetch(address, role, group, member, described.topic_id)
    assert refused.error_code == ErrorCode.none
    assert [p.error_code for t in refused.responses for p in t.partitions] == [
        ErrorCode.topic_authorization_failed]
    admin.grant_permission(role, TOPIC, ["consume"], kind="topic")
    allowed = _share_fetch(address, role, group, member, described.topic_id)
    assert not _codes(allowed) & _AUTH_FAILED
