"""The idempotent producer's rules, over raw sockets, deterministically.

A batch sent again (its answer lost with its connection) is not written
twice and is answered with the offset of the first copy; a batch that
overlaps what was written is OUT_OF_ORDER_SEQUENCE_NUMBER; InitProducerId
gives fresh ids and bumps epochs (KIP-360), after which sequences restart.
"""

from __future__ import annotations

import datetime
import socket
import sys
from typing import Any

from kafka.record.default_records import DefaultRecordBatchBuilder
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode
from kio.static.primitive import Records

from tests.integration.kafka.test_kafka_clients import create_topic
from tests.support.bookies import BookieProcess
from tests.support.kafka import kafka_address, raw_request, read_response
from tests.support.wait import wait_for

PRODUCE, LIST_OFFSETS, INIT_PRODUCER_ID = 0, 2, 22
TIMEOUT_S = 30.0


def connect(server: BookieProcess) -> socket.socket:
    return socket.create_connection(kafka_address(server), timeout=TIMEOUT_S)


def init_producer_id(sock: socket.socket, producer_id: int = -1,
                     epoch: int = -1) -> tuple[int, int]:
    cls: Any = load_request_schema(INIT_PRODUCER_ID, 4)
    sock.sendall(raw_request(INIT_PRODUCER_ID, 4, 1, cls(
        transactional_id=None, transaction_timeout=datetime.timedelta(seconds=60),
        producer_id=producer_id, producer_epoch=epoch)))
    _, response = read_response(sock, INIT_PRODUCER_ID, 4)
    assert response.error_code == ErrorCode.none
    return int(response.producer_id), int(response.producer_epoch)


def batch(producer_id: int, epoch: int, base_sequence: int, values: list[bytes]) -> bytes:
    builder: Any = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=False, producer_id=producer_id,
        producer_epoch=epoch, base_sequence=base_sequence, batch_size=1 << 20)
    for index, value in enumerate(values):
        builder.append(index, 1_700_000_000_000, None, value, [])
    return bytes(builder.build())


def produce_request(topic: str, records: bytes, correlation: int, acks: int = -1) -> bytes:
    cls: Any = load_request_schema(PRODUCE, 8)
    module = sys.modules[cls.__module__]
    return raw_request(PRODUCE, 8, correlation, cls(
        transactional_id=None, acks=acks, timeout=datetime.timedelta(seconds=10),
        topic_data=(module.TopicProduceData(name=topic, partition_data=(
            module.PartitionProduceData(index=0, records=Records(records)),)),)))


def produce(sock: socket.socket, topic: str, records: bytes) -> tuple[ErrorCode, int]:
    sock.sendall(produce_request(topic, records, 7))
    _, response = read_response(sock, PRODUCE, 8)
    answer = response.responses[0].partition_responses[0]
    return answer.error_code, int(answer.base_offset)


def latest(sock: socket.socket, topic: str) -> int:
    cls: Any = load_request_schema(LIST_OFFSETS, 5)
    module = sys.modules[cls.__module__]
    sock.sendall(raw_request(LIST_OFFSETS, 5, 3, cls(
        replica_id=-1, isolation_level=0, topics=(module.ListOffsetsTopic(
            name=topic, partitions=(module.ListOffsetsPartition(
                partition_index=0, current_leader_epoch=-1, timestamp=-1),)),))))
    _, response = read_response(sock, LIST_OFFSETS, 5)
    return int(response.topics[0].partitions[0].offset)


def test_a_batch_sent_again_is_answered_with_its_first_offset(
        server: BookieProcess, bootstrap: str) -> None:
    topic = "idempotence"
    create_topic(bootstrap, topic, 1)
    with connect(server) as sock:
        producer_id, epoch = init_producer_id(sock)
        assert produce(sock, topic, batch(producer_id, epoch, 0, [b"a", b"b"])) == (
            ErrorCode.none, 0)
        second = batch(producer_id, epoch, 2, [b"c", b"d", b"e"])
    # The answer to the second batch is lost with its connection ...
    with connect(server) as lost:
        lost.sendall(produce_request(topic, second, 9))
        probe = connect(server)
        wait_for(lambda: latest(probe, topic) == 5, "the second batch written")
    # ... so the producer sends it again on a new one: success, same offset, no copy.
    with connect(server) as sock:
        assert produce(sock, topic, second) == (ErrorCode.none, 2)
        assert produce(sock, topic, batch(producer_id, epoch, 0, [b"a", b"b"])) == (
            ErrorCode.none, 0)
        assert latest(sock, topic) == 5
        # Overlapping what was written without matching it: refused, nothing written.
        code, _ = produce(sock, topic, batch(producer_id, epoch, 4, [b"x", b"y"]))
        assert code == ErrorCode.out_of_order_sequence_number
        assert produce(sock, topic, batch(producer_id, epoch, 5, [b"f"])) == (
            ErrorCode.none, 5)
        # An epoch bump keeps the id; sequences start again at 0.
        assert init_producer_id(sock, producer_id, epoch) == (producer_id, epoch + 1)
        assert produce(sock, topic, batch(producer_id, epoch + 1, 0, [b"g"])) == (
            ErrorCode.none, 6)
        assert latest(sock, topic) == 7
    probe.close()


def test_producer_ids_are_never_given_twice(server: BookieProcess) -> None:
    with connect(server) as sock:
        ids = {init_producer_id(sock)[0] for _ in range(20)}
    assert len(ids) == 20
    assert all(producer_id >= 0 for producer_id in ids)


def test_acks_0_gets_no_answer_and_later_answers_keep_their_order(
        server: BookieProcess, bootstrap: str) -> None:
    topic = "acks-zero"
    create_topic(bootstrap, topic, 1)
    with connect(server) as sock:
        # Two fire-and-forget batches, then a request that is answered: the
        # first answer on the connection is that one's.
        sock.sendall(produce_request(topic, batch(-1, -1, -1, [b"a"]), 21, acks=0)
                     + produce_request(topic, batch(-1, -1, -1, [b"b", b"c"]), 22, acks=0)
                     + produce_request(topic, batch(-1, -1, -1, [b"d"]), 23, acks=1))
        correlation, response = read_response(sock, PRODUCE, 8)
        answer = response.responses[0].partition_responses[0]
        assert (correlation, answer.error_code, answer.base_offset) == (
            23, ErrorCode.none, 3)
        assert latest(sock, topic) == 4


def test_a_batch_that_skips_sequences_is_refused(server: BookieProcess, bootstrap: str) -> None:
    topic = "sequence-gap"
    create_topic(bootstrap, topic, 1)
    with connect(server) as sock:
        producer_id, epoch = init_producer_id(sock)
        assert produce(sock, topic, batch(producer_id, epoch, 0, [b"a", b"b"])) == (
            ErrorCode.none, 0)
        # Sequences 2-4 never came: 5 is refused, nothing is written ...
        code, _ = produce(sock, topic, batch(producer_id, epoch, 5, [b"f"]))
        assert code == ErrorCode.out_of_order_sequence_number
        assert latest(sock, topic) == 2
        # ... and the producer's resend from 2 goes on where it left off.
        assert produce(sock, topic, batch(producer_id, epoch, 2, [b"c", b"d", b"e"])) == (
            ErrorCode.none, 2)
        assert produce(sock, topic, batch(producer_id, epoch, 5, [b"f"])) == (
            ErrorCode.none, 5)
