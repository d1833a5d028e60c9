"""The Kafka admin APIs mapped onto Folio, through real clients (docs/kafka.md, "Admin APIs").

One ``folio standalone --kafka-port 0`` for the module; librdkafka's
``AdminClient`` (confluent-kafka) and kafka-python's ``KafkaAdminClient`` call
each API as a Kafka tool would, and the answers are checked against what
Folio did (partitions made by a split, records truncated, offsets deleted,
configs and their sources, producers and transactions as the coordinator
knows them).
"""

from __future__ import annotations

import datetime
import itertools
import os
import socket
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka import TopicPartition as PyPartition
from kafka.admin import ConfigResource as PyResource
from kafka.admin import ConfigResourceType
from kafka.errors import InvalidPartitionsError, RebalanceInProgressError
from kafka.structs import OffsetAndMetadata
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

import folio
from broker.kafka.apis import dispatch_table
from tests.support.bookies import BookieProcess
from tests.support.kafka import kafka_address, raw_request, read_response

DEADLINE_S = 60.0
_NAMES = itertools.count()


def _name(prefix: str) -> str:
    return f"adm.{prefix}.{next(_NAMES)}.{uuid.uuid4().hex[:6]}"


@pytest.fixture
def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


@pytest.fixture
def py_admin(bootstrap: str) -> Iterator[KafkaAdminClient]:
    made = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30_000)
    try:
        yield made
    finally:
        made.close()


def _create(admin: AdminClient, name: str, partitions: int,
            config: dict[str, str] | None = None) -> None:
    futures = admin.create_topics([NewTopic(name, num_partitions=partitions,
                                            replication_factor=1, config=config or {})])
    futures[name].result(DEADLINE_S)


def _produce(bootstrap: str, topic: str, partition: int, values: list[bytes],
             **settings: Any) -> list[KafkaError | None]:
    """Produce ``values`` to one partition; each delivery's error (None: written)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, **settings})
    outcomes: list[KafkaError | None] = []
    for value in values:
        producer.produce(topic, value=value, partition=partition,
                         on_delivery=lambda error, _message: outcomes.append(error))
    assert producer.flush(DEADLINE_S) == 0
    return outcomes


def _configs(admin: AdminClient, resource: ConfigResource) -> dict[str, Any]:
    return dict(admin.describe_configs([resource])[resource].result(DEADLINE_S))


# ------------------------------------------------------------------ cluster, versions


def test_describe_cluster_names_the_broker_as_metadata_does(
        admin: AdminClient, bootstrap: str) -> None:
    described = admin.describe_cluster().result(DEADLINE_S)
    host, port = bootstrap.rsplit(":", 1)
    assert described.cluster_id == "folio"
    assert [(node.id, node.host, node.port) for node in described.nodes] == [(0, host, int(port))]
    assert described.controller is not None and described.controller.id == 0


def test_kafka_python_infers_a_current_broker(py_admin: KafkaAdminClient) -> None:
    # kafka-python infers the broker's version from the highest API versions it
    # advertises; DescribeLogDirs v5 (served) is what a 4.3 broker has.
    version = py_admin._manager.broker_version
    assert version is not None and version >= (4, 3), version


def test_describe_log_dirs_lists_the_partitions_with_their_sizes(
        admin: AdminClient, py_admin: KafkaAdminClient, bootstrap: str,
        server: BookieProcess) -> None:
    topic = _name("logdirs")
    _create(admin, topic, 2)
    assert _produce(bootstrap, topic, 1, [b"x" * 1000] * 5) == [None] * 5
    answers = py_admin.describe_log_dirs()
    assert [answer["broker"] for answer in answers] == [0]
    (log_dir,) = answers[0]["log_dirs"]
    assert log_dir["log_dir"] == "folio:ledgers"
    # The standalone's bookie keeps every entry in DATA_DIR/bookie: its volume's size,
    # and what is free there (others write to the disk meanwhile: only bounded).
    volume = os.statvfs(server.data_dir / "bookie")
    assert log_dir["total_bytes"] == volume.f_blocks * volume.f_frsize > 0
    assert 0 < log_dir["usable_bytes"] <= log_dir["total_bytes"]
    (mine,) = [t for t in log_dir["topics"] if t["name"] == topic]
    sizes = {p["partition_index"]: p["partition_size"] for p in mine["partitions"]}
    assert sizes[0] == 0
    assert sizes[1] > 5000


# ------------------------------------------------------------------ configs


def test_describe_configs_synonyms_name_the_brokers_defaults(
        admin: AdminClient, py_admin: KafkaAdminClient, server: BookieProcess) -> None:
    topic = _name("synonyms")
    _create(admin, topic, 1, {"retention.ms": "3600000"})
    # librdkafka always asks for synonyms: the override, then the broker's default.
    configs = _configs(admin, ConfigResource(ConfigResource.Type.TOPIC, topic))
    assert [(name, entry.value, entry.source)
            for name, entry in configs["retention.ms"].synonyms.items()] == [
        ("retention.ms", "3600000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value),
        ("log.retention.ms", "-1", ConfigSource.DEFAULT_CONFIG.value)]
    assert [(name, entry.value, entry.source)
            for name, entry in configs["max.message.bytes"].synonyms.items()] == [
        ("message.max.bytes", "1048576", ConfigSource.DEFAULT_CONFIG.value)]
    broker = _configs(admin, ConfigResource(ConfigResource.Type.BROKER, "0"))
    assert [(name, entry.source) for name, entry in broker["broker.id"].synonyms.items()] \
        == [("broker.id", ConfigSource.STATIC_BROKER_CONFIG.value)]
    assert broker["log.retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value

    # kafka-python only when asked; its default filter hides DEFAULT_CONFIG entries.
    resource = PyResource(ConfigResourceType.TOPIC, topic)
    shown = py_admin.describe_configs([resource], include_synonyms=True)["topic"][topic]
    assert list(shown) == ["retention.ms"]
    assert shown["retention.ms"]["synonyms"] == [
        {"name": "retention.ms", "value": "3600000", "source": "DYNAMIC_TOPIC_CONFIG"},
        {"name": "log.retention.ms", "value": "-1", "source": "DEFAULT_CONFIG"}]
    every = py_admin.describe_configs([resource], include_synonyms=True,
                                      config_filter="all")["topic"][topic]
    assert every["segment.ms"]["synonyms"] == [
        {"name": "log.roll.ms", "value": "14400000", "source": "DEFAULT_CONFIG"}]
    unasked = py_admin.describe_configs([resource], config_filter="all")["topic"][topic]
    assert all(entry["synonyms"] == [] for entry in unasked.values())

    # v4 (flexible) with include_documentation, as no client library here asks it.
    request: Any = load_request_schema(32, 4)
    resource_cls = sys.modules[request.__module__].DescribeConfigsResource
    with socket.create_connection(kafka_address(server), timeout=DEADLINE_S) as sock:
        sock.sendall(raw_request(32, 4, 7, request(
            resources=(resource_cls(resource_type=2, resource_name=topic,
                                    configuration_keys=("segment.bytes",)),),
            include_synonyms=True, include_documentation=True)))
        correlation, answer = read_response(sock, 32, 4)
    assert correlation == 7
    (entry,) = answer.results[0].configs
    assert entry.name == "segment.bytes" and "rolls over to a new ledger" in entry.documentation
    assert [(synonym.name, synonym.source) for synonym in entry.synonyms] \
        == [("log.segment.bytes", ConfigSource.DEFAULT_CONFIG.value)]


def test_describe_configs_reports_sources_and_the_broker_keys(
        admin: AdminClient, bootstrap: str) -> None:
    topic = _name("sources")
    _create(admin, topic, 1, {"retention.ms": "3600000"})
    configs = _configs(admin, ConfigResource(ConfigResource.Type.TOPIC, topic))
    assert configs["retention.ms"].value == "3600000"
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["max.message.bytes"].value == "1048576"
    assert configs["max.message.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["segment.bytes"].source == ConfigSource.DEFAULT_CONFIG.value

    broker = _configs(admin, ConfigResource(ConfigResource.Type.BROKER, "0"))
    assert broker["advertised.listeners"].value == f"PLAINTEXT://{bootstrap}"
    assert broker["broker.id"].value == "0"
    assert broker["message.max.bytes"].value == "1048576"
    assert broker["num.partitions"].value == "1"
    assert broker["group.min.session.timeout.ms"].value == "6000"
    assert broker["group.max.session.timeout.ms"].value == "1800000"
    assert broker["group.coordinator.rebalance.protocols"].value == "classic,consumer"
    assert broker["group.consumer.session.timeout.ms"].value == "45000"
    assert broker["group.consumer.heartbeat.interval.ms"].value == "5000"
    assert broker["group.consumer.assignors"].value == "uniform,range"
    # Read-only but the dynamic broker configs (docs/kafka.md, "Dynamic broker configs").
    dynamic = {"max.connections", "max.connections.per.ip", "max.connections.per.ip.overrides",
               "max.connection.creation.rate"}
    assert {name for name, entry in broker.items() if not entry.is_read_only} == dynamic


def test_a_record_batch_over_max_message_bytes_is_refused(
        admin: AdminClient, bootstrap: str) -> None:
    topic = _name("big")
    _create(admin, topic, 1)
    big = b"b" * (2 * 1024 * 1024)
    (error,) = _produce(bootstrap, topic, 0, [big], **{"message.max.bytes": 4 * 1024 * 1024,
                                                         "compression.type": "none"})
    assert error is not None and error.code() == KafkaError.MSG_SIZE_TOO_LARGE, error
    # The topic's limit is what is enforced: raised, the same record is written.
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("max.message.bytes", str(3 * 1024 * 1024),
                    incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(DEADLINE_S)
    assert _produce(bootstrap, topic, 0, [big], **{"message.max.bytes": 4 * 1024 * 1024,
                                                  "compression.type": "none"}) == [None]


def test_incremental_alter_configs_sets_and_resets(admin: AdminClient) -> None:
    topic = _name("incr")
    _create(admin, topic, 1)
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("max.message.bytes", "2000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(DEADLINE_S)
    configs = _configs(admin, ConfigResource(ConfigResource.Type.TOPIC, topic))
    assert configs["retention.ms"].value == "7200000"
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["max.message.bytes"].value == "2000"

    reset = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE)])
    admin.incremental_alter_configs([reset])[reset].result(DEADLINE_S)
    configs = _configs(admin, ConfigResource(ConfigResource.Type.TOPIC, topic))
    assert configs["retention.ms"].value == "-1"
    assert configs["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["max.message.bytes"].value == "2000"

    bad = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("compression.type", "zstd", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as refused:
        admin.incremental_alter_configs([bad])[bad].result(DEADLINE_S)
    assert refused.value.args[0].code() == KafkaError.INVALID_CONFIG
    assert "compression.type" in refused.value.args[0].str()


def test_alter_configs_replaces_the_whole_set(admin: AdminClient,
                                             py_admin: KafkaAdminClient) -> None:
    topic = _name("alter")
    _create(admin, topic, 1, {"retention.ms": "3600000"})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic,
                              set_config={"segment.bytes": "1048576"})
    with pytest.warns(DeprecationWarning):  # librdkafka's, not the broker's: Kafka's API
        futures = admin.alter_configs([resource])
    futures[resource].result(DEADLINE_S)
    configs = _configs(admin, ConfigResource(ConfigResource.Type.TOPIC, topic))
    assert configs["segment.bytes"].value == "1048576"
    assert configs["segment.bytes"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    # Not named: back to the default, as Kafka's AlterConfigs does.
    assert configs["retention.ms"].value == "-1"
    assert configs["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value

    # kafka-python's non-incremental alter_configs keeps what DescribeConfigs
    # reports as set on the topic (so the sources must be right) and sends it again.
    py_admin.alter_configs([PyResource(ConfigResourceType.TOPIC, topic,
                                       configs={"retention.ms": "60000"})], incremental=False)
    configs = _configs(admin, ConfigResource(ConfigResource.Type.TOPIC, topic))
    assert configs["retention.ms"].value == "60000"
    assert configs["segment.bytes"].value == "1048576"


# ------------------------------------------------------------------ partitions, records


def test_create_partitions_splits_one_segment(admin: AdminClient, py_admin: KafkaAdminClient,
                                              bootstrap: str, client: folio.Client) -> None:
    topic = _name("grow")
    _create(admin, topic, 1)
    with pytest.raises(InvalidPartitionsError, match="at least two"):
        py_admin.create_partitions({topic: 2})
    py_admin.create_partitions({topic: 3})
    segments = client.get_segments(topic, include_sealed=True)
    assert [(s.number, s.sealed) for s in segments] == [(0, True), (1, False), (2, False)]
    assert (segments[1].key_low, segments[1].key_high) == (0.0, 0.5)
    metadata = admin.list_topics(topic, timeout=DEADLINE_S).topics[topic]
    assert sorted(metadata.partitions) == [0, 1, 2]
    assert _produce(bootstrap, topic, 2, [b"after"]) == [None]
    with pytest.raises(InvalidPartitionsError, match="already has 3"):
        py_admin.create_partitions({topic: 3})


def test_delete_records_truncates_to_the_offset(admin: AdminClient, bootstrap: str) -> None:
    topic = _name("trunc")
    _create(admin, topic, 1)
    assert _produce(bootstrap, topic, 0, [b"r%d" % i for i in range(5)]) == [None] * 5
    partition = TopicPartition(topic, 0, -1)  # -1: the high watermark, everything
    deleted = admin.delete_records([partition])[partition].result(DEADLINE_S)
    assert deleted.low_watermark == 5
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        tp = PyPartition(topic, 0)
        assert consumer.beginning_offsets([tp])[tp] == 5
        assert consumer.end_offsets([tp])[tp] == 5
    finally:
        consumer.close()
    past = TopicPartition(topic, 0, 99)
    with pytest.raises(KafkaException) as refused:
        admin.delete_records([past])[past].result(DEADLINE_S)
    assert refused.value.args[0].code() == KafkaError.OFFSET_OUT_OF_RANGE


# ------------------------------------------------------------------ groups


def test_offset_delete_removes_a_groups_offsets(admin: AdminClient,
                                                py_admin: KafkaAdminClient,
                                                bootstrap: str) -> None:
    topic = _name("offdel")
    group = _name("group")
    _create(admin, topic, 2)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                             enable_auto_commit=False)
    try:
        consumer.commit({PyPartition(topic, 0): OffsetAndMetadata(3, "", -1),
                         PyPartition(topic, 1): OffsetAndMetadata(4, "", -1)})
    finally:
        consumer.close()
    before = py_admin.list_group_offsets({group: None})[group]
    assert {tp.partition: value.offset for tp, value in before.items()} == {0: 3, 1: 4}
    answers = py_admin.delete_group_offsets(group, [PyPartition(topic, 0)])
    assert {tp.partition: error.__name__ for tp, error in answers.items()} == {0: "NoError"}
    after = py_admin.list_group_offsets({group: None})[group]
    assert {tp.partition: value.offset for tp, value in after.items()} == {1: 4}


def test_offset_delete_refuses_a_topic_a_member_subscribes_to(
        admin: AdminClient, py_admin: KafkaAdminClient, bootstrap: str) -> None:
    used, other = _name("used"), _name("other")
    group = _name("group")
    _create(admin, used, 1)
    _create(admin, other, 1)
    member = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                           enable_auto_commit=False, session_timeout_ms=10_000,
                           heartbeat_interval_ms=500)
    try:
        deadline = time.monotonic() + DEADLINE_S
        # Its metadata knows the topic first: a leader that assigns before it does
        # gives itself nothing ("No partition metadata") and keeps that.
        while not member.partitions_for_topic(used):
            assert time.monotonic() < deadline, "the member never saw the topic"
            time.sleep(0.1)
        member.subscribe([used])
        while not member.assignment():
            assert time.monotonic() < deadline, "the member got no partition"
            member.poll(200)
        while True:  # a rebalance may still be finishing (the first join's): poll, retry
            try:
                member.commit({PyPartition(used, 0): OffsetAndMetadata(1, "", -1),
                               PyPartition(other, 0): OffsetAndMetadata(2, "", -1)})
                break
            except RebalanceInProgressError:
                assert time.monotonic() < deadline, "the group never settled"
                member.poll(200)
        answers = py_admin.delete_group_offsets(group, [PyPartition(used, 0),
                                                        PyPartition(other, 0)])
        assert {tp.topic: error.__name__ for tp, error in answers.items()} == {
            used: "GroupSubscribedToTopicError", other: "NoError"}
        left = py_admin.list_group_offsets({group: None})[group]
        assert {tp.topic: value.offset for tp, value in left.items()} == {used: 1}
    finally:
        member.close()


# ------------------------------------------------------------------ producers, transactions


def test_producers_and_transactions_are_described(admin: AdminClient,
                                                  py_admin: KafkaAdminClient,
                                                  bootstrap: str) -> None:
    topic = _name("txn")
    _create(admin, topic, 2)
    idempotent = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True)
    try:
        idempotent.send(topic, b"one", partition=0).get(DEADLINE_S)
        idempotent.send(topic, b"two", partition=0).get(DEADLINE_S)
    finally:
        idempotent.close()
    described = py_admin.describe_producers([PyPartition(topic, 0)])
    ((_tp, state),) = described.items()
    (active,) = state.active_producers
    assert (active.producer_epoch, active.last_sequence) == (0, 1), active
    assert active.last_timestamp > 0

    transactional_id = _name("tid")
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
    producer.init_transactions(DEADLINE_S)
    producer.begin_transaction()
    producer.produce(topic, b"in txn", partition=1)
    assert producer.flush(DEADLINE_S) == 0
    (listed,) = py_admin.list_transactions().values()
    (mine,) = [t for t in listed if t.transactional_id == transactional_id]
    assert mine.state.value == "Ongoing"
    described = py_admin.describe_transactions([transactional_id])[transactional_id]
    assert described.state.value == "Ongoing"
    assert (described.producer_id, described.producer_epoch) == (mine.producer_id, 0)
    assert described.transaction_timeout_ms == 60_000
    assert described.transaction_start_time_ms > 0
    assert {(tp.topic, tp.partition) for tp in described.topic_partitions} == {(topic, 1)}
    producer.commit_transaction(DEADLINE_S)
    (ended,) = py_admin.list_transactions(state_filters=["CompleteCommit"]).values()
    assert transactional_id in {t.transactional_id for t in ended}
    after = py_admin.describe_transactions([transactional_id])[transactional_id]
    assert after.state.value == "CompleteCommit"
    assert after.topic_partitions == set()


# ------------------------------------------------------------------ leaders, reassignments


def test_elections_and_reassignments_answer_what_a_folio_cluster_has(
        admin: AdminClient, py_admin: KafkaAdminClient) -> None:
    topic = _name("leaders")
    _create(admin, topic, 2)
    result = py_admin.elect_leaders(0, {topic: [0, 1]}, raise_errors=False)
    ((_topic, codes),) = [(r.topic, [p.error_code for p in r.partition_result])
                          for r in result.replica_election_results]
    assert codes == [ErrorCode.election_not_needed.value] * 2
    assert py_admin.list_partition_reassignments() == {}
    answer = py_admin.alter_partition_reassignments({PyPartition(topic, 0): [0]})
    assert {tp.partition: error.__name__ for tp, error in answer.items()} \
        == {0: "InvalidReplicationAssignmentError"}


# ------------------------------------------------------------------ ApiVersions, JoinGroup


def test_every_advertised_version_has_a_schema_and_a_handler(bootstrap: str) -> None:
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        request: Any = load_request_schema(18, 4)
        sock.sendall(raw_request(18, 4, 1, request(client_software_name="t",
                                                   client_software_version="1")))
        _, answer = read_response(sock, 18, 4)
    served = {entry.api_key: (entry.min_version, entry.max_version) for entry in answer.api_keys}
    assert served == {row.key: (row.min_version, row.max_version)
                      for row in dispatch_table().rows()}
    for key, (low, high) in served.items():
        for version in range(low, high + 1):
            load_request_schema(key, version)  # KioIndexError if kio cannot decode it


@pytest.mark.parametrize(("session_ms", "expected"), [
    (6_000, ErrorCode.none), (1_800_000, ErrorCode.none),
    (5_999, ErrorCode.invalid_session_timeout), (1_800_001, ErrorCode.invalid_session_timeout)])
def test_join_group_takes_the_session_timeouts_a_kafka_broker_takes(
        bootstrap: str, session_ms: int, expected: ErrorCode) -> None:
    host, port = bootstrap.rsplit(":", 1)
    join: Any = load_request_schema(11, 3)
    protocol = sys.modules[join.__module__].JoinGroupRequestProtocol
    request = join(group_id=_name("join"), session_timeout=datetime.timedelta(
        milliseconds=session_ms), rebalance_timeout=datetime.timedelta(seconds=5),
        member_id="", protocol_type="consumer",
        protocols=(protocol(name="range", metadata=b""),))
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(raw_request(11, 3, 1, request))
        _, answer = read_response(sock, 11, 3)
    assert answer.error_code == expected
