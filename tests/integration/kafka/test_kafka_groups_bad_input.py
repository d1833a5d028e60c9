"""Bad group and transaction requests get Kafka's error codes, and the connection goes on.

Every request here is one a misbehaving client could send; each is answered
with the code a Kafka broker gives, on one connection that stays open to
the end (a last Heartbeat proves it).
"""

from __future__ import annotations

import datetime
import socket
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from tests.integration.kafka.test_kafka_clients import create_topic
from tests.integration.kafka.test_kafka_idempotence import batch, produce
from tests.support.bookies import BookieProcess
from tests.support.kafka import kafka_address, raw_request, read_response

FIND_COORDINATOR, JOIN, HEARTBEAT, LEAVE, SYNC = 10, 11, 12, 13, 14
OFFSET_COMMIT, OFFSET_FETCH, DESCRIBE, INIT_PRODUCER_ID = 8, 9, 15, 22
ADD_PARTITIONS, ADD_OFFSETS, END_TXN, TXN_OFFSET_COMMIT = 24, 25, 26, 28
DELETE_GROUPS = 42
SECOND = datetime.timedelta(seconds=1)


class Session:
    """One raw connection: ``call`` sends a request and returns the decoded answer."""

    def __init__(self, server: BookieProcess) -> None:
        self.sock = socket.create_connection(kafka_address(server), timeout=30)
        self.correlation = 0

    def call(self, api_key: int, version: int, **fields: Any) -> Any:
        cls: Any = load_request_schema(api_key, version)
        self.correlation += 1
        self.sock.sendall(raw_request(api_key, version, self.correlation, cls(**fields)))
        correlation, response = read_response(self.sock, api_key, version)
        assert correlation == self.correlation
        return response

    def close(self) -> None:
        self.sock.close()

    def module(self, api_key: int, version: int) -> Any:
        return sys.modules[load_request_schema(api_key, version).__module__]

    def join(self, group: str, member_id: str = "", session_s: float = 10.0,
             protocol_type: str = "consumer", protocols: tuple[str, ...] = ("range",)) -> Any:
        module = self.module(JOIN, 5)
        return self.call(JOIN, 5, group_id=group,
                         session_timeout=datetime.timedelta(seconds=session_s),
                         rebalance_timeout=datetime.timedelta(seconds=10), member_id=member_id,
                         group_instance_id=None, protocol_type=protocol_type,
                         protocols=tuple(module.JoinGroupRequestProtocol(name=name,
                                                                         metadata=b"m")
                                         for name in protocols))

    def commit(self, group: str, generation: int, member_id: str, topic: str, partition: int,
               metadata: str = "") -> ErrorCode:
        module = self.module(OFFSET_COMMIT, 8)
        response = self.call(OFFSET_COMMIT, 8, group_id=group,
                             generation_id_or_member_epoch=generation, member_id=member_id,
                             group_instance_id=None, topics=(module.OffsetCommitRequestTopic(
                                 name=topic, partitions=(module.OffsetCommitRequestPartition(
                                     partition_index=partition, committed_offset=1,
                                     committed_leader_epoch=-1,
                                     committed_metadata=metadata),)),))
        return ErrorCode(response.topics[0].partitions[0].error_code)


@pytest.fixture
def session(server: BookieProcess) -> Iterator[Session]:
    opened = Session(server)
    yield opened
    opened.close()


def test_bad_group_requests_get_kafka_error_codes(server: BookieProcess, bootstrap: str,
                                                  session: Session) -> None:
    create_topic(bootstrap, "bad-groups", 1)
    assert session.call(FIND_COORDINATOR, 3, key="g", key_type=7).error_code == (
        ErrorCode.invalid_request)
    found = session.call(FIND_COORDINATOR, 3, key="g", key_type=0)
    assert (found.error_code, found.port) == (ErrorCode.none, kafka_address(server)[1])
    assert session.join("").error_code == ErrorCode.invalid_group_id
    assert session.join("g", session_s=0.1).error_code == ErrorCode.invalid_session_timeout
    assert session.join("g", protocol_type="").error_code == (
        ErrorCode.inconsistent_group_protocol)
    assert session.join("g", member_id="nobody").error_code == ErrorCode.unknown_member_id
    # KIP-394: a first join learns its member id, then joins with it.
    first = session.join("g")
    assert first.error_code == ErrorCode.member_id_required and first.member_id
    joined = session.join("g", member_id=first.member_id)
    assert (joined.error_code, joined.generation_id, joined.leader) == (
        ErrorCode.none, 1, first.member_id)
    # Another protocol type, or no protocol in common, cannot join a group in use.
    assert session.join("g", protocol_type="connect").error_code == (
        ErrorCode.inconsistent_group_protocol)
    assert session.join("g", protocols=("sticky",)).error_code == (
        ErrorCode.inconsistent_group_protocol)
    member = first.member_id
    sync = session.call(SYNC, 5, group_id="g", generation_id=1, member_id="nobody",
                        group_instance_id=None, protocol_type="consumer",
                        protocol_name="range", assignments=())
    assert sync.error_code == ErrorCode.unknown_member_id
    sync = session.call(SYNC, 5, group_id="g", generation_id=9, member_id=member,
                        group_instance_id=None, protocol_type="consumer",
                        protocol_name="range", assignments=())
    assert sync.error_code == ErrorCode.illegal_generation
    sync = session.call(SYNC, 5, group_id="g", generation_id=1, member_id=member,
                        group_instance_id=None, protocol_type="consumer",
                        protocol_name="roundrobin", assignments=())
    assert sync.error_code == ErrorCode.inconsistent_group_protocol
    module = session.module(SYNC, 5)
    sync = session.call(SYNC, 5, group_id="g", generation_id=1, member_id=member,
                        group_instance_id=None, protocol_type="consumer",
                        protocol_name="range", assignments=(module.SyncGroupRequestAssignment(
                            member_id=member, assignment=b"mine"),))
    assert (sync.error_code, sync.assignment) == (ErrorCode.none, b"mine")
    assert session.call(HEARTBEAT, 4, group_id="g", generation_id=2, member_id=member,
                        group_instance_id=None).error_code == ErrorCode.illegal_generation
    assert session.call(HEARTBEAT, 4, group_id="other", generation_id=1, member_id=member,
                        group_instance_id=None).error_code == ErrorCode.unknown_member_id
    # Commits: a stale generation, a stranger, an unknown topic or partition, big metadata.
    assert session.commit("g", 0, member, "bad-groups", 0) == ErrorCode.illegal_generation
    assert session.commit("g", 1, "nobody", "bad-groups", 0) == ErrorCode.unknown_member_id
    assert session.commit("g", -1, "", "bad-groups", 0) == ErrorCode.unknown_member_id
    assert session.commit("g", 1, member, "no-such-topic", 0) == (
        ErrorCode.unknown_topic_or_partition)
    assert session.commit("g", 1, member, "bad-groups", 5) == (
        ErrorCode.unknown_topic_or_partition)
    assert session.commit("g", 1, member, "_kafka_offsets", 0) == (
        ErrorCode.unknown_topic_or_partition)
    assert session.commit("g", 1, member, "bad-groups", 0, "m" * 5000) == (
        ErrorCode.offset_metadata_too_large)
    assert session.commit("g", 1, member, "bad-groups", 0) == ErrorCode.none
    assert session.commit("fresh", 3, "", "bad-groups", 0) == ErrorCode.illegal_generation
    fetched = session.call(OFFSET_FETCH, 7, group_id="", topics=None, require_stable=False)
    assert fetched.error_code == ErrorCode.invalid_group_id
    described = session.call(DESCRIBE, 5, groups=("g", "unknown"),
                             include_authorized_operations=False)
    assert [(g.group_state, len(g.members)) for g in described.groups] == [
        ("Stable", 1), ("Dead", 0)]
    deleted = session.call(DELETE_GROUPS, 2, groups_names=("g", "unknown", ""))
    assert [r.error_code for r in deleted.results] == [
        ErrorCode.non_empty_group, ErrorCode.group_id_not_found, ErrorCode.invalid_group_id]
    left = session.call(LEAVE, 5, group_id="g", members=(
        session.module(LEAVE, 5).MemberIdentity(member_id="nobody", group_instance_id=None,
                                               reason=None),))
    assert left.members[0].error_code == ErrorCode.unknown_member_id
    assert session.call(HEARTBEAT, 4, group_id="g", generation_id=1, member_id=member,
                        group_instance_id=None).error_code == ErrorCode.none
    # The offsets' and transactional ids' system topics take no public write.
    for topic in ("_kafka_offsets", "_kafka_txn_state"):
        assert produce(session.sock, topic, batch(-1, -1, -1, [b"forged"]))[0] == (
            ErrorCode.unknown_topic_or_partition)


def test_bad_transaction_requests_get_kafka_error_codes(bootstrap: str,
                                                        session: Session) -> None:
    create_topic(bootstrap, "bad-txns", 1)

    def init(timeout: datetime.timedelta = 60 * SECOND) -> Any:
        return session.call(INIT_PRODUCER_ID, 4, transactional_id="bad-txn",
                            transaction_timeout=timeout, producer_id=-1, producer_epoch=-1)

    assert init(0 * SECOND).error_code == ErrorCode.invalid_transaction_timeout
    assert init(3600 * SECOND).error_code == ErrorCode.invalid_transaction_timeout
    first = init()
    second = init()
    assert (second.producer_id, second.producer_epoch) == (
        first.producer_id, first.producer_epoch + 1)
    module = session.module(ADD_PARTITIONS, 3)

    def add(producer_id: int, epoch: int, topic: str = "bad-txns",
            partitions: tuple[int, ...] = (0,)) -> list[ErrorCode]:
        response = session.call(
            ADD_PARTITIONS, 3, v3_and_below_transactional_id="bad-txn",
            v3_and_below_producer_id=producer_id, v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=(module.AddPartitionsToTxnTopic(name=topic,
                                                                partitions=partitions),))
        return [ErrorCode(p.partition_error_code)
                for t in response.results_by_topic_v3_and_below for p in t.results_by_partition]

    assert add(first.producer_id, first.producer_epoch) == [ErrorCode.producer_fenced]
    assert add(first.producer_id + 1000, second.producer_epoch) == [
        ErrorCode.invalid_producer_id_mapping]
    assert add(second.producer_id, second.producer_epoch, partitions=(0, 3)) == [
        ErrorCode.operation_not_attempted, ErrorCode.unknown_topic_or_partition]
    assert add(second.producer_id, second.producer_epoch, topic="_txnlog") == [
        ErrorCode.unknown_topic_or_partition]
    end = session.call(END_TXN, 3, transactional_id="nobody", producer_id=1, producer_epoch=0,
                       committed=True)
    assert end.error_code == ErrorCode.invalid_producer_id_mapping
    offsets = session.call(ADD_OFFSETS, 3, transactional_id="bad-txn",
                           producer_id=second.producer_id,
                           producer_epoch=second.producer_epoch, group_id="")
    assert offsets.error_code == ErrorCode.invalid_group_id
    # TxnOffsetCommit before any transaction began: INVALID_TXN_STATE.
    txn_module = session.module(TXN_OFFSET_COMMIT, 3)
    committed = session.call(
        TXN_OFFSET_COMMIT, 3, transactional_id="bad-txn", group_id="txn-group",
        producer_id=second.producer_id, producer_epoch=second.producer_epoch,
        generation_id=-1, member_id="", group_instance_id=None,
        topics=(txn_module.TxnOffsetCommitRequestTopic(name="bad-txns", partitions=(
            txn_module.TxnOffsetCommitRequestPartition(
                partition_index=0, committed_offset=1, committed_leader_epoch=-1,
                committed_metadata=""),)),))
    assert committed.topics[0].partitions[0].error_code == ErrorCode.invalid_txn_state
    assert add(second.producer_id, second.producer_epoch) == [ErrorCode.none]
    end = session.call(END_TXN, 3, transactional_id="bad-txn", producer_id=second.producer_id,
                       producer_epoch=second.producer_epoch, committed=False)
    assert end.error_code == ErrorCode.none
    # A retried EndTxn of the same outcome is a success; the other outcome is not.
    retried = session.call(END_TXN, 3, transactional_id="bad-txn",
                           producer_id=second.producer_id,
                           producer_epoch=second.producer_epoch, committed=False)
    assert retried.error_code == ErrorCode.none
    other = session.call(END_TXN, 3, transactional_id="bad-txn", producer_id=second.producer_id,
                         producer_epoch=second.producer_epoch, committed=True)
    assert other.error_code == ErrorCode.invalid_txn_state
