"""The Kafka front-end's small parts: the dispatch table, configs, ids, sequences."""

from __future__ import annotations

from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from broker.api import AppendResult, TopicConfig
from broker.broker_config import BrokerConfig
from broker.kafka.apis import dispatch_table
from broker.kafka.dispatch import Api, Call, DispatchTable
from broker.kafka.producer_ids import BLOCK_SIZE, ProducerIds
from broker.kafka.sequences import BATCHES_PER_PRODUCER, answer_of
from broker.kafka.topic_configs import UnknownConfigError, config_changes, kafka_configs
from ledger.metadata.rocksdb_store import RocksDBMetadataStore


async def _handler(context: object, call: Call) -> None:
    del context, call


def test_the_table_refuses_two_rows_of_one_key_and_bad_ranges() -> None:
    with pytest.raises(ValueError, match="two rows"):
        DispatchTable([Api(0, "A", 0, 1, _handler), Api(0, "B", 0, 1, _handler)])
    with pytest.raises(ValueError, match="version range"):
        DispatchTable([Api(0, "A", 3, 1, _handler)])


def test_the_served_apis() -> None:
    rows = {row.name: (row.key, row.min_version, row.max_version)
            for row in dispatch_table().rows()}
    assert rows == {
        "Produce": (0, 3, 13), "Fetch": (1, 4, 17), "ListOffsets": (2, 1, 6),
        "OffsetForLeaderEpoch": (23, 2, 4),
        "Metadata": (3, 0, 12), "ApiVersions": (18, 0, 4), "CreateTopics": (19, 2, 7),
        "DeleteTopics": (20, 1, 6), "InitProducerId": (22, 0, 5),
        "DescribeConfigs": (32, 1, 4),
        # Consumer groups and transactions.
        "FindCoordinator": (10, 0, 4), "JoinGroup": (11, 0, 9), "Heartbeat": (12, 0, 4),
        "LeaveGroup": (13, 0, 5), "SyncGroup": (14, 0, 5), "OffsetCommit": (8, 2, 9),
        "OffsetFetch": (9, 1, 9), "DescribeGroups": (15, 0, 5), "ListGroups": (16, 0, 5),
        "DeleteGroups": (42, 0, 2),
        # KIP-848 consumer groups.
        "ConsumerGroupHeartbeat": (68, 0, 1), "ConsumerGroupDescribe": (69, 0, 1),
        "ShareGroupHeartbeat": (76, 1, 1), "ShareGroupDescribe": (77, 1, 1),
        "ShareFetch": (78, 1, 2), "ShareAcknowledge": (79, 1, 2),
        "DescribeShareGroupOffsets": (90, 0, 1), "AlterShareGroupOffsets": (91, 0, 0),
        "DeleteShareGroupOffsets": (92, 0, 0),
        # Transactions, with KIP-890's versions.
        "AddPartitionsToTxn": (24, 0, 5), "AddOffsetsToTxn": (25, 0, 4), "EndTxn": (26, 0, 5),
        "TxnOffsetCommit": (28, 0, 5),
        # ACL admin on Folio's grants.
        "DescribeAcls": (29, 1, 3), "CreateAcls": (30, 1, 3), "DeleteAcls": (31, 1, 3),
        # Authentication (docs/kafka.md, "Security").
        "SaslHandshake": (17, 1, 1), "SaslAuthenticate": (36, 0, 2),
        "DescribeUserScramCredentials": (50, 0, 0), "AlterUserScramCredentials": (51, 0, 0),
        # Delegation tokens (docs/kafka.md, "Delegation tokens").
        "CreateDelegationToken": (38, 1, 3), "RenewDelegationToken": (39, 1, 2),
        "ExpireDelegationToken": (40, 1, 2), "DescribeDelegationToken": (41, 1, 3),
        # Admin APIs mapped onto Folio (docs/kafka.md, "Admin APIs").
        "DescribeCluster": (60, 0, 2), "DescribeLogDirs": (35, 1, 5),
        "AlterConfigs": (33, 0, 2), "IncrementalAlterConfigs": (44, 0, 1),
        "CreatePartitions": (37, 0, 3), "DeleteRecords": (21, 0, 2), "OffsetDelete": (47, 0, 0),
        "DescribeProducers": (61, 0, 0), "DescribeTransactions": (65, 0, 0),
        "ListTransactions": (66, 0, 2), "ElectLeaders": (43, 0, 2),
        "AlterPartitionReassignments": (45, 0, 1), "ListPartitionReassignments": (46, 0, 0),
        "DescribeTopicPartitions": (75, 0, 0),
        # Client quotas (docs/kafka.md, "Client quotas").
        "DescribeClientQuotas": (48, 0, 1), "AlterClientQuotas": (49, 0, 1)}
    assert dispatch_table().get(18) is not None and dispatch_table().get(999) is None


def test_kafka_configs_map_both_ways() -> None:
    changes = config_changes({"retention.ms": "1000", "segment.bytes": "2048",
                              "cleanup.policy": "delete", "max.message.bytes": None})
    assert changes == {"retention_ms": 1000, "ledger_rollover_bytes": 2048}
    shown = kafka_configs(TopicConfig(retention_ms=1000))
    assert shown["retention.ms"] == "1000" and shown["cleanup.policy"] == "delete"
    for bad in ({"cleanup.policy": "compact"}, {"min.insync.replicas": "2"},
                {"retention.ms": "soon"}):
        with pytest.raises(UnknownConfigError):
            config_changes(bad)


async def test_producer_ids_are_unique_across_instances_and_restarts(tmp_path: Path) -> None:
    store = RocksDBMetadataStore(str(tmp_path / "metadata"))
    first, second = ProducerIds(store), ProducerIds(store)
    ids = [await first.next_id() for _ in range(3)] + [await second.next_id()]
    await store.close()
    store = RocksDBMetadataStore(str(tmp_path / "metadata"))
    ids.append(await ProducerIds(store).next_id())
    await store.close()
    assert ids == [0, 1, 2, BLOCK_SIZE, 2 * BLOCK_SIZE]


def test_answers_to_appended_and_resent_batches() -> None:
    assert BATCHES_PER_PRODUCER == 5  # as Kafka's broker
    assert answer_of(AppendResult(7, 3, 9), "kafka:1:0", "t/0") == (ErrorCode.none, 7, None)
    # A resend of one of the producer's last batches: the first copy's offset.
    assert answer_of(AppendResult(7, 0, 9, duplicate=True), "kafka:1:0", "t/0") == (
        ErrorCode.none, 7, None)
    # An older one: written before, offset unknown (never a made-up -1 with success).
    code, offset, message = answer_of(AppendResult(-1, 0, 9, duplicate=True), "kafka:1:0",
                                      "t/0")
    assert (code, offset) == (ErrorCode.duplicate_sequence_number, -1)
    assert message is not None and "sequence 9" in message


def test_kafka_port_settings() -> None:
    assert BrokerConfig().kafka_port == -1  # off by default
    assert BrokerConfig(kafka_port=0).kafka_port == 0  # any free port
    for bad in ({"kafka_port": -2}, {"kafka_port": 70000}, {"kafka_advertised_port": -1}):
        with pytest.raises(ValueError, match="kafka"):
            BrokerConfig(**bad)  # type: ignore[arg-type]
