"""Bad input on the Kafka port, over raw sockets: Kafka error answers or a closed connection.

After every case the broker still serves: a fresh connection's ApiVersions
is answered and the process is alive. Requests are encoded with kio, then
cut or damaged on purpose.
"""

from __future__ import annotations

import datetime
import socket
import struct
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder
from kio.schema.errors import ErrorCode
from kio.static.primitive import Records

from tests.integration.kafka.test_kafka_clients import create_topic
from tests.support.bookies import BookieProcess
from tests.support.kafka import kafka_address, raw_request, read_frame, read_response

TIMEOUT_S = 30.0
API_VERSIONS, METADATA, PRODUCE, LIST_OFFSETS = 18, 3, 0, 2


@pytest.fixture
def connect(server: BookieProcess) -> Iterator[Any]:
    sockets: list[socket.socket] = []

    def make() -> socket.socket:
        made = socket.create_connection(kafka_address(server), timeout=TIMEOUT_S)
        sockets.append(made)
        return made

    yield make
    for made in sockets:
        made.close()


def api_versions(version: int = 3) -> Any:
    module = sys.modules[_request_class(API_VERSIONS, version).__module__]
    if version >= 3:
        return module.ApiVersionsRequest(client_software_name="raw",
                                         client_software_version="1")
    return module.ApiVersionsRequest()


def _request_class(api_key: int, version: int) -> Any:
    from kio.index import load_request_schema  # noqa: PLC0415

    return load_request_schema(api_key, version)


def assert_serves(server: BookieProcess, connect: Any) -> None:
    """The broker is alive, answers a new connection, and logged no unexpected error."""
    assert server.process.poll() is None
    log = server.log_path.read_text(errors="replace")
    assert " ERROR " not in log and "Traceback" not in log, log[-2000:]
    sock = connect()
    sock.sendall(raw_request(API_VERSIONS, 3, 77, api_versions()))
    correlation, response = read_response(sock, API_VERSIONS, 3)
    assert (correlation, response.error_code) == (77, ErrorCode.none)


def assert_closed(sock: socket.socket) -> None:
    """The broker closed the connection without answering."""
    assert read_frame(sock) is None


@pytest.mark.parametrize("frame", [
    struct.pack(">i", 100) + b"\x00" * 10,          # cut short
    struct.pack(">i", -5),                           # negative size
    struct.pack(">i", 2**31 - 1) + b"\x00" * 64,     # far above the frame limit
    struct.pack(">i", 4) + b"\x00\x12\x00\x00",      # too small for a header
    b"\x00\x00",                                     # size itself cut
])
def test_bad_frames_close_the_connection(server: BookieProcess, connect: Any,
                                         frame: bytes) -> None:
    sock = connect()
    sock.sendall(frame)
    sock.shutdown(socket.SHUT_WR)
    assert_closed(sock)
    assert_serves(server, connect)


def test_unknown_api_key_closes_the_connection(server: BookieProcess, connect: Any) -> None:
    sock = connect()
    body = struct.pack(">hhih", 999, 0, 5, -1)
    sock.sendall(struct.pack(">i", len(body)) + body)
    assert_closed(sock)
    assert_serves(server, connect)


def test_unsupported_version_closes_the_connection(server: BookieProcess,
                                                   connect: Any) -> None:
    sock = connect()
    body = struct.pack(">hhih", METADATA, 99, 5, -1) + b"\x00" * 8
    sock.sendall(struct.pack(">i", len(body)) + body)
    assert_closed(sock)
    assert_serves(server, connect)


def test_api_versions_of_a_newer_client_answers_unsupported_version(
        server: BookieProcess, connect: Any) -> None:
    sock = connect()
    body = struct.pack(">hhih", API_VERSIONS, 42, 9, -1) + b"\x00" * 6
    sock.sendall(struct.pack(">i", len(body)) + body)
    correlation, response = read_response(sock, API_VERSIONS, 0)
    assert (correlation, response.error_code) == (9, ErrorCode.unsupported_version)
    served = {entry.api_key: (entry.min_version, entry.max_version)
              for entry in response.api_keys}
    assert served[API_VERSIONS] == (0, 4)
    assert served[PRODUCE] == (3, 13)
    # The connection stays usable, as KIP-511 has the client retry on it.
    sock.sendall(raw_request(API_VERSIONS, 3, 10, api_versions()))
    assert read_response(sock, API_VERSIONS, 3)[0] == 10


def test_a_body_that_does_not_decode_closes_the_connection(server: BookieProcess,
                                                           connect: Any) -> None:
    sock = connect()
    frame = raw_request(METADATA, 1, 5, _request_class(METADATA, 1)(topics=None))
    body = frame[4:-1] + b"\x7f\xff\xff\xff"  # a topic count of 2**31-1 with no topics
    sock.sendall(struct.pack(">i", len(body)) + body)
    assert_closed(sock)
    assert_serves(server, connect)


def _batch(values: list[bytes]) -> bytearray:
    builder: Any = DefaultRecordBatchBuilder(magic=2, compression_type=0,
                                             is_transactional=False, producer_id=-1,
                                             producer_epoch=-1, base_sequence=-1,
                                             batch_size=1 << 20)
    for index, value in enumerate(values):
        builder.append(index, 1_700_000_000_000, None, value, [])
    return bytearray(builder.build())


def _produce(sock: socket.socket, topic: str, records: bytes, correlation: int) -> Any:
    cls = _request_class(PRODUCE, 8)
    module = sys.modules[cls.__module__]
    request = cls(transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=10),
                  topic_data=(module.TopicProduceData(name=topic, partition_data=(
                      module.PartitionProduceData(index=0, records=Records(records)),)),))
    sock.sendall(raw_request(PRODUCE, 8, correlation, request))
    got, response = read_response(sock, PRODUCE, 8)
    assert got == correlation
    return response.responses[0].partition_responses[0]


def _latest(sock: socket.socket, topic: str) -> int:
    cls = _request_class(LIST_OFFSETS, 5)
    module = sys.modules[cls.__module__]
    request = cls(replica_id=-1, isolation_level=0, topics=(module.ListOffsetsTopic(
        name=topic, partitions=(module.ListOffsetsPartition(
            partition_index=0, current_leader_epoch=-1, timestamp=-1),)),))
    sock.sendall(raw_request(LIST_OFFSETS, 5, 3, request))
    _, response = read_response(sock, LIST_OFFSETS, 5)
    return int(response.topics[0].partitions[0].offset)


def test_produce_refuses_damaged_batches_and_writes_nothing(
        server: BookieProcess, connect: Any, bootstrap: str) -> None:
    topic = "raw-produce"
    create_topic(bootstrap, topic, 1)
    sock = connect()
    good = _batch([b"one", b"two"])
    damaged = bytearray(good)
    damaged[-1] ^= 0xFF  # a record byte: the CRC no longer matches
    assert _produce(sock, topic, bytes(damaged), 1).error_code == ErrorCode.corrupt_message
    old_magic = bytearray(good)
    old_magic[16] = 1
    assert _produce(sock, topic, bytes(old_magic), 2).error_code == ErrorCode.invalid_record
    assert _produce(sock, topic, bytes(good[:40]), 3).error_code == ErrorCode.corrupt_message
    assert _produce(sock, topic, bytes(good + good), 4).error_code == ErrorCode.invalid_record
    assert _produce(sock, "no-such-topic", bytes(good), 5).error_code == (
        ErrorCode.unknown_topic_or_partition)
    assert _produce(sock, "_txnlog", bytes(good), 5).error_code == (
        ErrorCode.unknown_topic_or_partition)
    assert _latest(sock, topic) == 0  # nothing was written
    accepted = _produce(sock, topic, bytes(good), 6)
    assert (accepted.error_code, accepted.base_offset) == (ErrorCode.none, 0)
    assert _latest(sock, topic) == 2
    assert_serves(server, connect)
