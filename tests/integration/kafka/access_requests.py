"""The Kafka requests of the permission test (``test_kafka_access.py``), per API.

``REQUESTS`` names, per API of ``broker.kafka.access.KAFKA_TABLE``, the
version and the request that exercises a requirement of its row, on the
test's topic, group and transactional id. Moved from the test file.
"""

from __future__ import annotations

import datetime
import sys
from collections.abc import Callable
from typing import Any

from kio.index import load_request_schema

from broker.kafka import access
from broker.kafka.access import Requirement

__all__ = ["GROUP", "REQUESTS", "TOPIC", "TXN_ID", "req", "topic_offsets"]

TOPIC = "acc.t"
GROUP = "acc.g"
TXN_ID = "acc.x"
_SECOND = datetime.timedelta(seconds=1)


def req(api_key: int, version: int, struct: str | None = None, /, **values: Any) -> Any:
    """The request of ``api_key`` at ``version``, or its nested ``struct``, of ``values``."""
    cls: Any = load_request_schema(api_key, version)
    if struct is not None:
        cls = getattr(sys.modules[cls.__module__], struct)
    return cls(**values)


def _config_type(requirement: Requirement) -> int:
    """The config resource a requirement of the configs' rows is about: broker 4, group
    32 (a share group's configs), else topic 2."""
    if requirement is access.CLUSTER:
        return 4
    return 32 if requirement in (access.GROUP_LOOKUP, access.GROUP_ADMIN) else 2


def _config_name(requirement: Requirement) -> str:
    return {4: "0", 32: GROUP, 2: TOPIC}[_config_type(requirement)]


def _records() -> bytes:
    return b""  # no batch: a permitted role gets INVALID_RECORD, never an authorisation code


def _produce(requirement: Requirement) -> Any:
    part = req(0, 7, "PartitionProduceData", index=0, records=_records())
    txn = TXN_ID if requirement is access.TXN_PRODUCE else None
    return req(0, 7, transactional_id=txn, acks=-1, timeout=_SECOND, topic_data=(
        req(0, 7, "TopicProduceData", name=TOPIC, partition_data=(part,)),))


def topic_offsets(api_key: int, version: int, topic_cls: str, partition_cls: str) -> Any:
    return (req(api_key, version, topic_cls, name=TOPIC, partitions=(
        req(api_key, version, partition_cls, partition_index=0, committed_offset=0,
              committed_metadata=None),)),)


def _acl_filter(cls: str | None) -> dict[str, Any]:
    return {"resource_type_filter": 2, "resource_name_filter": TOPIC, "pattern_type_filter": 3,
            "principal_filter": "User:someone", "host_filter": None, "operation": 1,
            "permission_type": 1}


#: Per API: (api key, version, the request exercising ``requirement``).
REQUESTS: dict[str, tuple[int, int, Callable[[Requirement], Any]]] = {
    "ApiVersions": (18, 3, lambda _r: req(18, 3, client_software_name="t",
                                            client_software_version="1")),
    "Produce": (0, 7, _produce),
    "Fetch": (1, 11, lambda _r: req(1, 11, max_wait=datetime.timedelta(0), min_bytes=1,
                                      topics=(req(1, 11, "FetchTopic", topic=TOPIC,
                                                    partitions=(req(
                                                        1, 11, "FetchPartition", partition=0,
                                                        fetch_offset=0,
                                                        partition_max_bytes=1024),)),),
                                      forgotten_topics_data=())),
    "ListOffsets": (2, 5, lambda _r: req(2, 5, replica_id=-1, isolation_level=0, topics=(
        req(2, 5, "ListOffsetsTopic", name=TOPIC, partitions=(
            req(2, 5, "ListOffsetsPartition", partition_index=0, timestamp=-1),)),))),
    "OffsetForLeaderEpoch": (23, 4, lambda _r: req(23, 4, replica_id=-1, topics=(
        req(23, 4, "OffsetForLeaderTopic", topic=TOPIC, partitions=(
            req(23, 4, "OffsetForLeaderPartition", partition=0, leader_epoch=0),)),))),
    "Metadata": (3, 9, lambda _r: req(3, 9, topics=(
        req(3, 9, "MetadataRequestTopic", name=TOPIC),),
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False)),
    "OffsetCommit": (8, 8, lambda _r: req(8, 8, group_id=GROUP, member_id="",
                                            topics=topic_offsets(
                                                8, 8, "OffsetCommitRequestTopic",
                                                "OffsetCommitRequestPartition"))),
    "OffsetFetch": (9, 7, lambda _r: req(9, 7, group_id=GROUP, topics=(
        req(9, 7, "OffsetFetchRequestTopic", name=TOPIC, partition_indexes=(0,)),))),
    "FindCoordinator": (10, 3, lambda r: req(
        10, 3, key=TXN_ID if r is access.TXN_PRODUCE else GROUP,
        key_type=1 if r is access.TXN_PRODUCE else 0)),
    "JoinGroup": (11, 7, lambda _r: req(
        11, 7, group_id=GROUP, session_timeout=datetime.timedelta(seconds=10), member_id="",
        protocol_type="consumer", protocols=(
            req(11, 7, "JoinGroupRequestProtocol", name="range", metadata=b""),))),
    "Heartbeat": (12, 4, lambda _r: req(12, 4, group_id=GROUP, generation_id=1,
                                          member_id="m")),
    "LeaveGroup": (13, 3, lambda _r: req(13, 3, group_id=GROUP, members=(
        req(13, 3, "MemberIdentity", member_id="m"),))),
    "SyncGroup": (14, 5, lambda _r: req(14, 5, group_id=GROUP, generation_id=1,
                                          member_id="m", assignments=())),
    "DescribeGroups": (15, 5, lambda _r: req(15, 5, groups=(GROUP,),
                                               include_authorized_operations=False)),
    "ListGroups": (16, 4, lambda _r: req(16, 4)),
    # A leave (epoch -1) of no member: checked, then GROUP_ID_NOT_FOUND; no group is made.
    "ConsumerGroupHeartbeat": (68, 1, lambda _r: req(
        68, 1, group_id=GROUP, member_id="acc-member", member_epoch=-1, instance_id=None,
        rack_id=None, rebalance_timeout=datetime.timedelta(seconds=30),
        subscribed_topic_names=(TOPIC,), subscribed_topic_regex=None, server_assignor=None,
        topic_partitions=None)),
    "ConsumerGroupDescribe": (69, 1, lambda _r: req(69, 1, group_ids=(GROUP,),
                                                      include_authorized_operations=False)),
    # Share groups: a leave of no member (GROUP_ID_NOT_FOUND, no group made), and
    # requests of no member (UNKNOWN_MEMBER_ID after the group's check).
    "ShareGroupHeartbeat": (76, 1, lambda _r: req(
        76, 1, group_id=GROUP, member_id="acc-member", member_epoch=-1, rack_id=None,
        subscribed_topic_names=(TOPIC,))),
    "ShareGroupDescribe": (77, 1, lambda _r: req(77, 1, group_ids=(GROUP,),
                                                   include_authorized_operations=False)),
    "ShareFetch": (78, 1, lambda _r: req(
        78, 1, group_id=GROUP, member_id="acc-member", share_session_epoch=0,
        max_wait=_SECOND, min_bytes=1, max_bytes=1024, max_records=1, batch_size=1,
        topics=(), forgotten_topics_data=())),
    "ShareAcknowledge": (79, 1, lambda _r: req(
        79, 1, group_id=GROUP, member_id="acc-member", share_session_epoch=1, topics=())),
    # Share offsets of a partition that does not exist: checked, nothing written.
    "DescribeShareGroupOffsets": (90, 1, lambda _r: req(90, 1, groups=(req(
        90, 1, "DescribeShareGroupOffsetsRequestGroup", group_id=GROUP, topics=(req(
            90, 1, "DescribeShareGroupOffsetsRequestTopic", topic_name=TOPIC,
            partitions=(99,)),)),))),
    "AlterShareGroupOffsets": (91, 0, lambda _r: req(91, 0, group_id=GROUP, topics=(req(
        91, 0, "AlterShareGroupOffsetsRequestTopic", topic_name=TOPIC, partitions=(req(
            91, 0, "AlterShareGroupOffsetsRequestPartition", partition_index=99,
            start_offset=0),)),))),
    "DeleteShareGroupOffsets": (92, 0, lambda _r: req(92, 0, group_id=GROUP, topics=(req(
        92, 0, "DeleteShareGroupOffsetsRequestTopic", topic_name=TOPIC),))),
    "CreateTopics": (19, 5, lambda _r: req(19, 5, validate_only=True, topics=(
        req(19, 5, "CreatableTopic", name="acc.new", num_partitions=1, replication_factor=1,
              assignments=(), configs=()),))),
    "DeleteTopics": (20, 4, lambda _r: req(20, 4, topic_names=("acc.never.made",),
                                             timeout=_SECOND)),
    "InitProducerId": (22, 4, lambda r: req(
        22, 4, transactional_id=TXN_ID if r is access.TXN_PRODUCE else None,
        transaction_timeout=datetime.timedelta(seconds=60))),
    "AddPartitionsToTxn": (24, 3, lambda _r: req(
        24, 3, v3_and_below_transactional_id=TXN_ID, v3_and_below_producer_id=999_999,
        v3_and_below_producer_epoch=0, v3_and_below_topics=(
            req(24, 3, "AddPartitionsToTxnTopic", name=TOPIC, partitions=(0,)),))),
    "AddOffsetsToTxn": (25, 3, lambda _r: req(25, 3, transactional_id=TXN_ID,
                                                producer_id=999_999, producer_epoch=0,
                                                group_id=GROUP)),
    "EndTxn": (26, 3, lambda _r: req(26, 3, transactional_id=TXN_ID, producer_id=999_999,
                                       producer_epoch=0, committed=False)),
    "TxnOffsetCommit": (28, 3, lambda _r: req(
        28, 3, transactional_id=TXN_ID, group_id=GROUP, producer_id=999_999,
        producer_epoch=0, topics=topic_offsets(28, 3, "TxnOffsetCommitRequestTopic",
                                                "TxnOffsetCommitRequestPartition"))),
    "DescribeAcls": (29, 2, lambda _r: req(29, 2, **_acl_filter(None))),
    "CreateAcls": (30, 2, lambda _r: req(30, 2, creations=(req(
        30, 2, "AclCreation", resource_type=2, resource_name=TOPIC, resource_pattern_type=3,
        principal="User:someone", host="*", operation=3, permission_type=3),))),
    "DeleteAcls": (31, 2, lambda _r: req(31, 2, filters=(
        req(31, 2, "DeleteAclsFilter", **_acl_filter(None)),))),
    "DescribeConfigs": (32, 4, lambda r: req(32, 4, resources=(req(
        32, 4, "DescribeConfigsResource", resource_type=_config_type(r),
        resource_name=_config_name(r)),))),
    "DeleteGroups": (42, 2, lambda _r: req(42, 2, groups_names=(GROUP,))),
    # Admin APIs (docs/kafka.md, "Admin APIs"): checks only, nothing changed.
    "DescribeLogDirs": (35, 4, lambda _r: req(35, 4, topics=None)),
    "AlterConfigs": (33, 2, lambda r: req(33, 2, validate_only=True, resources=(req(
        33, 2, "AlterConfigsResource", resource_type=_config_type(r),
        resource_name=_config_name(r), configs=()),))),
    "IncrementalAlterConfigs": (44, 1, lambda r: req(44, 1, validate_only=True, resources=(
        req(44, 1, "AlterConfigsResource", resource_type=_config_type(r),
              resource_name=_config_name(r), configs=()),))),
    "CreatePartitions": (37, 3, lambda _r: req(37, 3, validate_only=True, timeout=_SECOND,
                                                 topics=(req(37, 3, "CreatePartitionsTopic",
                                                               name=TOPIC, count=3,
                                                               assignments=None),))),
    "DeleteRecords": (21, 2, lambda _r: req(21, 2, timeout=_SECOND, topics=(req(
        21, 2, "DeleteRecordsTopic", name=TOPIC, partitions=(req(
            21, 2, "DeleteRecordsPartition", partition_index=0, offset=0),)),))),
    "OffsetDelete": (47, 0, lambda _r: req(47, 0, group_id=GROUP, topics=(req(
        47, 0, "OffsetDeleteRequestTopic", name=TOPIC, partitions=(req(
            47, 0, "OffsetDeleteRequestPartition", partition_index=0),)),))),
    "DescribeProducers": (61, 0, lambda _r: req(61, 0, topics=(req(
        61, 0, "TopicRequest", name=TOPIC, partition_indexes=(0,)),))),
    "DescribeTransactions": (65, 0, lambda _r: req(65, 0, transactional_ids=(TXN_ID,))),
    "ElectLeaders": (43, 2, lambda _r: req(43, 2, election_type=0, timeout=_SECOND,
                                             topic_partitions=(req(
                                                 43, 2, "TopicPartitions", topic=TOPIC,
                                                 partitions=(0,)),))),
    "ListPartitionReassignments": (46, 0, lambda _r: req(46, 0, timeout=_SECOND,
                                                           topics=None)),
    "AlterPartitionReassignments": (45, 1, lambda _r: req(45, 1, timeout=_SECOND, topics=(
        req(45, 1, "ReassignableTopic", name=TOPIC, partitions=(req(
            45, 1, "ReassignablePartition", partition_index=0, replicas=None),)),))),
    # Empty rows (authentication gives the role): never called by the row test.
    "DescribeCluster": (60, 1, lambda _r: req(60, 1,
                                                include_cluster_authorized_operations=False)),
    "ListTransactions": (66, 1, lambda _r: req(66, 1)),
    "DescribeTopicPartitions": (75, 0, lambda _r: req(75, 0, topics=(
        req(75, 0, "TopicRequest", name=TOPIC),))),
    "SaslHandshake": (17, 1, lambda _r: req(17, 1, mechanism="PLAIN")),
    "SaslAuthenticate": (36, 2, lambda _r: req(36, 2, auth_bytes=b"")),
    "DescribeUserScramCredentials": (50, 0, lambda _r: req(50, 0, users=None)),
    "AlterUserScramCredentials": (51, 0, lambda _r: req(51, 0, upsertions=(), deletions=(
        req(51, 0, "ScramCredentialDeletion", name="acc.nobody", mechanism=1),))),
    # Delegation tokens: the owner's, renewers' and super-users' (checked by their handler,
    # tests/integration/kafka/test_kafka_delegation_tokens.py).
    "CreateDelegationToken": (38, 3, lambda _r: req(
        38, 3, owner_principal_type=None, owner_principal_name=None, renewers=(),
        max_lifetime=_SECOND)),
    "RenewDelegationToken": (39, 2, lambda _r: req(39, 2, hmac=b"x", renew_period=_SECOND)),
    "ExpireDelegationToken": (40, 2, lambda _r: req(40, 2, hmac=b"x",
                                                      expiry_time_period=_SECOND)),
    "DescribeDelegationToken": (41, 3, lambda _r: req(41, 3, owners=None)),
    "DescribeClientQuotas": (48, 1, lambda _r: req(48, 1, components=(), strict=False)),
    "AlterClientQuotas": (49, 1, lambda _r: req(49, 1, validate_only=True, entries=(
        req(49, 1, "EntryData", entity=(
            req(49, 1, "EntityData", entity_type="client-id", entity_name="acc.c"),),
            ops=(req(49, 1, "OpData", key="producer_byte_rate", value=1024.0,
                       remove=False),)),))),
}
