"""KIP-890 on a real standalone, over raw requests (docs/kafka.md, "Transactions").

No client installed here uses transaction version 2 (librdkafka 2.16 sends
AddPartitionsToTxn v0, EndTxn v1 and Produce v10; kafka-python 3.0 caps EndTxn
and AddPartitionsToTxn at v3, kafkajs at v1), so a TV2 producer is played by
hand: ApiVersions finalizes ``transaction.version`` 2; Produce v12 adds its
partition, TxnOffsetCommit v5 its group, EndTxn v5 answers the bumped epoch;
a ``read_committed`` consumer sees the committed transaction only; the stale
epoch is fenced while the lost answer's retry is answered. An older client's
path (AddPartitionsToTxn v3, EndTxn v3) keeps its epoch, and a batch to a
partition it did not add is refused (part 1). AddPartitionsToTxn v5 is
answered in the form brokers send (``verify_only``). kafkajs (version 1, no
epoch bump) commits and aborts with part 1's check on.
"""

from __future__ import annotations

import datetime
import json
import shutil
import socket
import subprocess
import sys
import time
import uuid
from typing import Any

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.record.default_records import DefaultRecordBatchBuilder
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode
from kio.static.primitive import Records

import folio
from tests.support.bookies import BookieProcess
from tests.support.kafka import kafka_address, raw_request, read_response
from tests.support.kafkajs import KAFKAJS, kafkajs_folder

_TIMEOUT = datetime.timedelta(seconds=10)
_TXN_TIMEOUT = datetime.timedelta(seconds=60)


def _make(api_key: int, version: int, struct: str | None = None, /, **values: Any) -> Any:
    cls: Any = load_request_schema(api_key, version)
    if struct is not None:
        cls = getattr(sys.modules[cls.__module__], struct)
    return cls(**values)


class _Wire:
    """One connection: a request at a version, its decoded answer."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._correlation = 0

    def call(self, api_key: int, version: int, request: Any) -> Any:
        self._correlation += 1
        self._sock.sendall(raw_request(api_key, version, self._correlation, request))
        correlation, response = read_response(self._sock, api_key, version)
        assert correlation == self._correlation
        return response

    def produce(self, version: int, transactional_id: str, topic: str, partition: int,
                batch: bytes) -> tuple[ErrorCode, int]:
        response = self.call(0, version, _make(
            0, version, transactional_id=transactional_id, acks=-1, timeout=_TIMEOUT,
            topic_data=(_make(0, version, "TopicProduceData", name=topic, partition_data=(
                _make(0, version, "PartitionProduceData", index=partition,
                      records=Records(batch)),)),)))
        answer = response.responses[0].partition_responses[0]
        return answer.error_code, int(answer.base_offset)

    def init(self, transactional_id: str, version: int = 5) -> tuple[int, int]:
        self.call(10, 3, _make(10, 3, key=transactional_id, key_type=1))
        init = self.call(22, version, _make(22, version, transactional_id=transactional_id,
                                            transaction_timeout=_TXN_TIMEOUT))
        assert init.error_code == ErrorCode.none
        return int(init.producer_id), int(init.producer_epoch)

    def end(self, version: int, transactional_id: str, producer_id: int, epoch: int,
            commit: bool) -> Any:
        return self.call(26, version, _make(26, version, transactional_id=transactional_id,
                                            producer_id=producer_id, producer_epoch=epoch,
                                            committed=commit))


def _batch(producer_id: int, epoch: int, first_sequence: int, values: list[bytes]) -> bytes:
    builder: Any = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=True,
                                             producer_id=producer_id, producer_epoch=epoch,
                                             base_sequence=first_sequence, batch_size=1 << 20)
    for index, value in enumerate(values):
        builder.append(index, 1_700_000_000_000, None, value, [])
    return bytes(builder.build())


def _read_committed(server: BookieProcess, topic: str, partitions: int) -> list[bytes]:
    """What ``read_committed`` serves, read up to a sentinel written to each partition last.

    "Aborted records are not there" is then proven by a record read after them.
    """
    host, port = kafka_address(server)
    marks = {b"sentinel-%d-%s" % (p, uuid.uuid4().hex.encode()): p for p in range(partitions)}
    sentinels = KafkaProducer(bootstrap_servers=f"{host}:{port}")
    try:
        for value, partition in marks.items():
            sentinels.send(topic, value=value, partition=partition)
        sentinels.flush(60)
    finally:
        sentinels.close()
    consumer = KafkaConsumer(bootstrap_servers=f"{host}:{port}",
                             isolation_level="read_committed", auto_offset_reset="earliest")
    try:
        consumer.assign([TopicPartition(topic, index) for index in range(partitions)])
        values: list[bytes] = []
        found: set[bytes] = set()
        deadline = time.monotonic() + 60
        while found != set(marks):
            assert time.monotonic() < deadline, f"read {values}, sentinels {found}"
            for records in consumer.poll(500).values():
                for record in records:
                    if record.value in marks:
                        found.add(record.value)
                    else:
                        values.append(record.value)
        return values
    finally:
        consumer.close()


def _features(response: Any) -> tuple[set[tuple[str, int, int]], set[tuple[str, int, int]]]:
    return ({(key.name, key.min_version, key.max_version)
             for key in response.supported_features},
            {(key.name, key.min_version_level, key.max_version_level)
             for key in response.finalized_features})


def test_api_versions_finalizes_transaction_version_2(server: BookieProcess) -> None:
    with socket.create_connection(kafka_address(server), timeout=30) as sock:
        wire = _Wire(sock)
        v4 = wire.call(18, 4, _make(18, 4, client_software_name="t",
                                    client_software_version="1"))
        v3 = wire.call(18, 3, _make(18, 3, client_software_name="t",
                                    client_software_version="1"))
    assert _features(v4) == ({("transaction.version", 0, 2)},
                             {("transaction.version", 2, 2)})
    # v3: a supported feature from level 0 is left out (KAFKA-17492); the finalized stays.
    assert _features(v3) == (set(), {("transaction.version", 2, 2)})
    assert v4.finalized_features_epoch >= 0
    served = {key.api_key: (key.min_version, key.max_version) for key in v4.api_keys}
    assert served[26] == (0, 5) and served[24] == (0, 5) and served[28] == (0, 5)
    assert served[0][1] >= 12 and served[22] == (0, 5) and served[25] == (0, 4)


def test_a_tv2_producer_commits_aborts_and_is_fenced_after_the_bump(
        server: BookieProcess, client: folio.Client) -> None:
    topic = f"tv2.{uuid.uuid4().hex[:8]}"
    transactional_id = f"tv2-{uuid.uuid4().hex[:8]}"
    group = f"tv2-group-{uuid.uuid4().hex[:8]}"
    client.create_topic(topic)
    with socket.create_connection(kafka_address(server), timeout=30) as sock:
        wire = _Wire(sock)
        producer_id, epoch = wire.init(transactional_id)
        # Produce v12 adds the partition: no AddPartitionsToTxn.
        assert wire.produce(12, transactional_id, topic, 0,
                            _batch(producer_id, epoch, 0, [b"a", b"b"])) == (ErrorCode.none, 0)
        # TxnOffsetCommit v5 adds the group: no AddOffsetsToTxn.
        offsets = wire.call(28, 5, _make(
            28, 5, transactional_id=transactional_id, group_id=group,
            producer_id=producer_id, producer_epoch=epoch, generation_id=-1, member_id="",
            group_instance_id=None, topics=(_make(
                28, 5, "TxnOffsetCommitRequestTopic", name=topic, partitions=(_make(
                    28, 5, "TxnOffsetCommitRequestPartition", partition_index=0,
                    committed_offset=2, committed_leader_epoch=-1,
                    committed_metadata=None),)),)))
        assert offsets.topics[0].partitions[0].error_code == ErrorCode.none
        ended = wire.end(5, transactional_id, producer_id, epoch, True)
        assert (ended.error_code, ended.producer_id, ended.producer_epoch) == (
            ErrorCode.none, producer_id, epoch + 1)
        # The next transaction, at the bumped epoch (sequences start again), aborted.
        assert wire.produce(12, transactional_id, topic, 0,
                            _batch(producer_id, epoch + 1, 0, [b"x"]))[0] == ErrorCode.none
        aborted = wire.end(5, transactional_id, producer_id, epoch + 1, False)
        assert (aborted.error_code, aborted.producer_epoch) == (ErrorCode.none, epoch + 2)
        # The abort's answer lost: its retry (epoch + 1) is answered, with the new epoch.
        again = wire.end(5, transactional_id, producer_id, epoch + 1, False)
        assert (again.error_code, again.producer_id, again.producer_epoch) == (
            ErrorCode.none, producer_id, epoch + 2)
        # A zombie at a bumped-past epoch is fenced, as Kafka answers it.
        assert wire.produce(12, transactional_id, topic, 0,
                            _batch(producer_id, epoch + 1, 1, [b"zombie"]))[0] == (
            ErrorCode.invalid_producer_epoch)
        fenced = wire.end(5, transactional_id, producer_id, epoch, True)
        assert (fenced.error_code, fenced.producer_epoch) == (ErrorCode.producer_fenced, -1)
        # The current epoch goes on.
        assert wire.produce(12, transactional_id, topic, 0,
                            _batch(producer_id, epoch + 2, 0, [b"c"]))[0] == ErrorCode.none
        last = wire.end(5, transactional_id, producer_id, epoch + 2, True)
        assert (last.error_code, last.producer_epoch) == (ErrorCode.none, epoch + 3)
    assert _read_committed(server, topic, 1) == [b"a", b"b", b"c"]
    host, port = kafka_address(server)
    consumer = KafkaConsumer(bootstrap_servers=f"{host}:{port}", group_id=group,
                             enable_auto_commit=False)
    try:
        assert consumer.committed(TopicPartition(topic, 0)) == 2
    finally:
        consumer.close()


def test_an_older_client_keeps_its_epoch_and_must_add_its_partitions(
        server: BookieProcess, client: folio.Client) -> None:
    topic = f"tv1.{uuid.uuid4().hex[:8]}"
    transactional_id = f"tv1-{uuid.uuid4().hex[:8]}"
    client.create_topic(topic, 2)
    with socket.create_connection(kafka_address(server), timeout=30) as sock:
        wire = _Wire(sock)
        producer_id, epoch = wire.init(transactional_id, version=4)
        added = wire.call(24, 3, _make(
            24, 3, v3_and_below_transactional_id=transactional_id,
            v3_and_below_producer_id=producer_id, v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=(_make(24, 3, "AddPartitionsToTxnTopic", name=topic,
                                       partitions=(0,)),)))
        assert added.results_by_topic_v3_and_below[0].results_by_partition[0]\
            .partition_error_code == ErrorCode.none
        # KIP-890 part 1: partition 1 was not added; refused, nothing written.
        assert wire.produce(8, transactional_id, topic, 1,
                            _batch(producer_id, epoch, 0, [b"not added"]))[0] == (
            ErrorCode.invalid_txn_state)
        assert wire.produce(11, transactional_id, topic, 1,
                            _batch(producer_id, epoch, 0, [b"not added"]))[0] == (
            ErrorCode.transaction_abortable)
        assert wire.produce(8, transactional_id, topic, 0,
                            _batch(producer_id, epoch, 0, [b"one"])) == (ErrorCode.none, 0)
        # A broker's AddPartitionsToTxn v5: verify_only checks, the other form adds.
        verify = _make(24, 5, "AddPartitionsToTxnTransaction",
                       transactional_id=transactional_id, producer_id=producer_id,
                       producer_epoch=epoch, verify_only=True, topics=(_make(
                           24, 5, "AddPartitionsToTxnTopic", name=topic, partitions=(0, 1)),))
        checked = wire.call(24, 5, _make(24, 5, transactions=(verify,)))
        assert checked.error_code == ErrorCode.none
        assert {r.partition_index: r.partition_error_code for r in checked
                .results_by_transaction[0].topic_results[0].results_by_partition} == {
            0: ErrorCode.none, 1: ErrorCode.transaction_abortable}
        add = _make(24, 5, "AddPartitionsToTxnTransaction", transactional_id=transactional_id,
                    producer_id=producer_id, producer_epoch=epoch, verify_only=False,
                    topics=(_make(24, 5, "AddPartitionsToTxnTopic", name=topic,
                                  partitions=(1,)),))
        assert wire.call(24, 5, _make(24, 5, transactions=(add,))).results_by_transaction[0]\
            .topic_results[0].results_by_partition[0].partition_error_code == ErrorCode.none
        assert wire.produce(8, transactional_id, topic, 1,
                            _batch(producer_id, epoch, 0, [b"two"])) == (ErrorCode.none, 0)
        ended = wire.end(3, transactional_id, producer_id, epoch, True)
        assert ended.error_code == ErrorCode.none
        # EndTxn v3: the epoch stays; the next transaction adds its partitions again.
        assert wire.produce(8, transactional_id, topic, 0,
                            _batch(producer_id, epoch, 1, [b"late"]))[0] == (
            ErrorCode.invalid_txn_state)
        # Nor does a Produce v12 open the next one at the epoch a v3 end kept.
        assert wire.produce(12, transactional_id, topic, 0,
                            _batch(producer_id, epoch, 1, [b"late"]))[0] == (
            ErrorCode.transaction_abortable)
        assert wire.end(3, transactional_id, producer_id, epoch, True).error_code == (
            ErrorCode.none)
    assert sorted(_read_committed(server, topic, 2)) == [b"one", b"two"]


def test_kafkajs_transactions_pass_part_1s_check(server: BookieProcess,
                                                 client: folio.Client) -> None:
    topic = f"kjs.{uuid.uuid4().hex[:8]}"
    group = f"kjs-group-{uuid.uuid4().hex[:8]}"
    client.create_topic(topic, 2)
    kafkajs_folder()  # installed once, under a lock
    node = shutil.which("node")
    assert node is not None
    host, port = kafka_address(server)
    done = subprocess.run([node, str(KAFKAJS / "txn.js"), f"{host}:{port}", topic, "2", group,
                           f"kjs-{uuid.uuid4().hex[:8]}"], capture_output=True, timeout=180,
                          check=False)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    seen = json.loads(done.stdout)
    assert len(seen["committed"]) == len(seen["aborted"]) == 6
    assert sorted(_read_committed(server, topic, 2)) == sorted(
        value.encode() for value in seen["committed"])
