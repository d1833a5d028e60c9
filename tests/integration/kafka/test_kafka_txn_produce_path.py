"""Transactional batches take Produce's one append path (docs/kafka.md, "Transactions").

Over a raw socket, as a transactional producer: InitProducerId, AddPartitionsToTxn,
then batches of the open transaction. The plain path's rules apply to them
unchanged: a batch skipping sequences is OUT_OF_ORDER_SEQUENCE_NUMBER with nothing
written, a resend of the last batch is answered with its first offset, two Produce
requests sent back to back (the second before the first is answered) are both
written, in order, and EndTxn commits what was written once.
"""

from __future__ import annotations

import datetime
import socket
import sys
import time
import uuid
from typing import Any

from kafka import KafkaConsumer, TopicPartition
from kafka.record.default_records import DefaultRecordBatchBuilder
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode
from kio.static.primitive import Records

import folio
from tests.support.bookies import BookieProcess
from tests.support.kafka import kafka_address, raw_request, read_response

_TIMEOUT = datetime.timedelta(seconds=10)


def _make(api_key: int, version: int, struct: str | None = None, /, **values: Any) -> Any:
    cls: Any = load_request_schema(api_key, version)
    if struct is not None:
        cls = getattr(sys.modules[cls.__module__], struct)
    return cls(**values)


def _batch(producer_id: int, epoch: int, first_sequence: int, values: list[bytes]) -> bytes:
    builder: Any = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=True,
                                             producer_id=producer_id, producer_epoch=epoch,
                                             base_sequence=first_sequence, batch_size=1 << 20)
    for index, value in enumerate(values):
        builder.append(index, 1_700_000_000_000, None, value, [])
    return bytes(builder.build())


def _produce_request(transactional_id: str, topic: str, batch: bytes) -> Any:
    return _make(0, 8, transactional_id=transactional_id, acks=-1, timeout=_TIMEOUT,
                 topic_data=(_make(0, 8, "TopicProduceData", name=topic, partition_data=(
                     _make(0, 8, "PartitionProduceData", index=0, records=Records(batch)),)),))


def _answer(sock: socket.socket, correlation: int) -> tuple[ErrorCode, int]:
    got, response = read_response(sock, 0, 8)
    assert got == correlation
    partition = response.responses[0].partition_responses[0]
    return partition.error_code, int(partition.base_offset)


def test_transactional_batches_follow_the_plain_paths_rules(
        server: BookieProcess, client: folio.Client) -> None:
    topic = f"txnpath.{uuid.uuid4().hex[:8]}"
    transactional_id = f"txnpath-{uuid.uuid4().hex[:8]}"
    client.create_topic(topic)
    with socket.create_connection(kafka_address(server), timeout=30) as sock:
        sock.sendall(raw_request(10, 3, 1, _make(10, 3, key=transactional_id, key_type=1)))
        assert read_response(sock, 10, 3)[1].error_code == ErrorCode.none
        sock.sendall(raw_request(22, 4, 2, _make(22, 4, transactional_id=transactional_id,
                                                 transaction_timeout=datetime.timedelta(
                                                     seconds=60))))
        init = read_response(sock, 22, 4)[1]
        assert init.error_code == ErrorCode.none
        producer_id, epoch = int(init.producer_id), int(init.producer_epoch)
        sock.sendall(raw_request(24, 3, 3, _make(
            24, 3, v3_and_below_transactional_id=transactional_id,
            v3_and_below_producer_id=producer_id, v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=(_make(24, 3, "AddPartitionsToTxnTopic", name=topic,
                                       partitions=(0,)),))))
        added = read_response(sock, 24, 3)[1]
        assert {r.partition_error_code for t in added.results_by_topic_v3_and_below
                for r in t.results_by_partition} == {ErrorCode.none}

        first = _batch(producer_id, epoch, 0, [b"a", b"b"])
        sock.sendall(raw_request(0, 8, 4, _produce_request(transactional_id, topic, first)))
        assert _answer(sock, 4) == (ErrorCode.none, 0)
        # A gap (sequence 5, not 2): refused, nothing written.
        gap = _batch(producer_id, epoch, 5, [b"gap"])
        sock.sendall(raw_request(0, 8, 5, _produce_request(transactional_id, topic, gap)))
        assert _answer(sock, 5)[0] == ErrorCode.out_of_order_sequence_number
        # The first batch again: answered with its first offset, not written twice.
        sock.sendall(raw_request(0, 8, 6, _produce_request(transactional_id, topic, first)))
        assert _answer(sock, 6) == (ErrorCode.none, 0)
        # Two requests back to back: both written, in order.
        second = _batch(producer_id, epoch, 2, [b"c"])
        third = _batch(producer_id, epoch, 3, [b"d", b"e"])
        sock.sendall(raw_request(0, 8, 7, _produce_request(transactional_id, topic, second))
                     + raw_request(0, 8, 8, _produce_request(transactional_id, topic, third)))
        assert _answer(sock, 7) == (ErrorCode.none, 2)
        assert _answer(sock, 8) == (ErrorCode.none, 3)
        sock.sendall(raw_request(26, 3, 9, _make(26, 3, transactional_id=transactional_id,
                                                 producer_id=producer_id,
                                                 producer_epoch=epoch, committed=True)))
        assert read_response(sock, 26, 3)[1].error_code == ErrorCode.none
    host, port = kafka_address(server)
    consumer = KafkaConsumer(bootstrap_servers=f"{host}:{port}",
                             isolation_level="read_committed", auto_offset_reset="earliest")
    try:
        consumer.assign([TopicPartition(topic, 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(values) < 5:
            assert time.monotonic() < deadline, f"read {values}"
            for records in consumer.poll(500).values():
                values.extend(record.value for record in records)
    finally:
        consumer.close()
    assert values == [b"a", b"b", b"c", b"d", b"e"]
