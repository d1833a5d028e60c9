"""Kafka producer sequences under faults: a failed append, a SIGKILL, a restart.

Real ``folio standalone --kafka-port 0`` processes. The producer state a
partition checks batches against (last sequence, last 5 batches) is the
segment's, persisted with it, so after the segment is loaded again:

* a batch that skips the sequences of a batch whose append failed is
  OUT_OF_ORDER_SEQUENCE_NUMBER, and the failed batch's resend is written (it
  used to be written after its successor was, then dropped as a duplicate:
  delivered, stored nowhere);
* a resend of one of the producer's last 5 batches is answered with the
  offset its first copy got (it used to be -1), an older one
  DUPLICATE_SEQUENCE_NUMBER;
* librdkafka's idempotent producer through bookie write failures delivers
  every record once, at the offset its report gives.

The append failure is injected by ``tests/support/faulty_bookie_standalone.py``
(the in-process bookie's writes fail on SIGUSR1 until SIGHUP). Every check
reads back up to the segments' end offsets (``tests/support/kafka_check.py``).
"""

from __future__ import annotations

import os
import signal
import socket
import threading
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer
from kio.schema.errors import ErrorCode

from tests.integration.kafka.test_kafka_clients import DEADLINE_S, create_topic
from tests.integration.kafka.test_kafka_idempotence import (
    batch,
    connect,
    init_producer_id,
    latest,
    produce,
)
from tests.support.bookies import BookieProcess, BookieProcesses
from tests.support.faulty_bookie_standalone import FAILING, HEALED
from tests.support.kafka import kafka_address
from tests.support.kafka_check import check_delivered_once, read_partitions, segment_ends
from tests.support.standalone import start_standalone
from tests.support.wait import wait_for

pytestmark = pytest.mark.faults

FAULTY = "tests.support.faulty_bookie_standalone"
#: What a failed append is answered with: retriable for Kafka clients.
STORAGE_ERRORS = (ErrorCode.request_timed_out, ErrorCode.kafka_storage_error,
                  ErrorCode.not_enough_replicas)


def _switch(server: BookieProcess, signum: signal.Signals, line: str) -> None:
    """Send ``signum`` and wait until the process logged ``line`` once more."""
    before = server.log().count(line)
    os.kill(server.pid, signum)
    wait_for(lambda: server.log().count(line) > before, line)


def _bootstrap(server: BookieProcess) -> str:
    return "{}:{}".format(*kafka_address(server))


def _produce_once_served(sock: socket.socket, topic: str, records: bytes,
                         ) -> tuple[ErrorCode, int]:
    """Produce until the answer is not a storage error (the segment loads again first)."""
    answers: list[tuple[ErrorCode, int]] = []

    def served() -> bool:
        answers.append(produce(sock, topic, records))
        return answers[-1][0] not in STORAGE_ERRORS
    # A failed append is answered once its outcome is known (the segment loaded
    # again, up to 15 s: broker.kafka.sequences.resolve_failed_append).
    wait_for(served, "a Produce answered by a loaded segment", timeout_s=120)
    return answers[-1]


def test_a_batch_skipping_a_failed_one_is_refused_and_the_resend_is_written(
        bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    server = start_standalone(bookie_processes, tmp_path / "data", "--kafka-port", "0",
                              module=FAULTY)
    bootstrap = _bootstrap(server)
    topic = "gap-after-failure"
    create_topic(bootstrap, topic, 1)
    with connect(server) as sock:
        producer_id, epoch = init_producer_id(sock)
        assert produce(sock, topic, batch(producer_id, epoch, 0, [b"a", b"b"])) == (
            ErrorCode.none, 0)
        # The append of sequences 2-3 fails: the segment fails, and loads again
        # on the next write.
        _switch(server, signal.SIGUSR1, FAILING)
        code, offset = produce(sock, topic, batch(producer_id, epoch, 2, [b"c", b"d"]))
        # A failed append is answered once its outcome is known
        # (resolve_failed_append): the failing bookie may have taken the entry
        # (then it is answered as written, at its offset) or not.
        assert code in (*STORAGE_ERRORS, ErrorCode.none), code
        _switch(server, signal.SIGHUP, HEALED)
        if code == ErrorCode.none:
            assert offset == 2
            # Stored: the next batch follows on, nothing skipped.
            assert _produce_once_served(sock, topic, batch(producer_id, epoch, 4,
                                                           [b"e", b"f"])) == (ErrorCode.none, 4)
        else:
            # Sequences 4-5 (sent before the producer learnt of the failure) skip
            # 2-3: refused, nothing written, even though the segment was loaded again.
            code, _ = _produce_once_served(sock, topic,
                                           batch(producer_id, epoch, 4, [b"e", b"f"]))
            assert code == ErrorCode.out_of_order_sequence_number
            assert latest(sock, topic) == 2
            # The producer resends from the failed batch on: both written, in order.
            assert produce(sock, topic, batch(producer_id, epoch, 2, [b"c", b"d"])) == (
                ErrorCode.none, 2)
            assert produce(sock, topic, batch(producer_id, epoch, 4, [b"e", b"f"])) == (
                ErrorCode.none, 4)
    ends = segment_ends(server.address, topic, (0,))
    assert ends == {0: 6}
    stored = read_partitions(bootstrap, topic, ends)
    assert stored[0] == list(enumerate([b"a", b"b", b"c", b"d", b"e", b"f"]))


def test_resends_after_restarts_are_answered_with_their_first_offsets(
        bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = start_standalone(bookie_processes, data, "--kafka-port", "0")
    topic = "resend-after-restart"
    create_topic(_bootstrap(server), topic, 1)
    batches = [[b"%d-%d" % (i, j) for j in range(i % 3 + 1)] for i in range(8)]
    firsts = [sum(len(b) for b in batches[:i]) for i in range(len(batches))]
    sequences = firsts  # one producer alone: sequence = offset
    with connect(server) as sock:
        producer_id, epoch = init_producer_id(sock)
        for i, values in enumerate(batches):
            assert produce(sock, topic, batch(producer_id, epoch, sequences[i], values)) == (
                ErrorCode.none, firsts[i])
    end = firsts[-1] + len(batches[-1])
    # SIGKILL twice: the first restart rebuilds the state from the entry headers
    # and snapshots it; the second finds only that snapshot (an empty tail ledger).
    for restart in range(2):
        server.kill()
        server = start_standalone(bookie_processes, data, "--kafka-port", "0")
        with connect(server) as sock:
            assert latest(sock, topic) == end
            if restart == 0:
                continue
            # The last batch again (its answer lost in the crash): its first offset.
            last = len(batches) - 1
            assert produce(sock, topic, batch(producer_id, epoch, sequences[last],
                                              batches[last])) == (ErrorCode.none, firsts[last])
            # Each of the last 5 batches likewise; an older one: written before,
            # offset unknown.
            for i in range(len(batches) - 5, len(batches)):
                assert produce(sock, topic, batch(producer_id, epoch, sequences[i],
                                                  batches[i])) == (ErrorCode.none, firsts[i])
            assert produce(sock, topic, batch(producer_id, epoch, 0, batches[0])) == (
                ErrorCode.duplicate_sequence_number, -1)
            # A gap is refused after the restart too; the next sequence is written.
            code, _ = produce(sock, topic, batch(producer_id, epoch, end + 1, [b"gap"]))
            assert code == ErrorCode.out_of_order_sequence_number
            assert produce(sock, topic, batch(producer_id, epoch, end, [b"next"])) == (
                ErrorCode.none, end)
    ends = segment_ends(server.address, topic, (0,))
    assert ends == {0: end + 1}
    stored = read_partitions(_bootstrap(server), topic, ends)
    assert [v for _, v in stored[0]] == [v for values in batches for v in values] + [b"next"]


RECORDS = 3000
ROUND = 100
FAULTS = 3
#: What the broker logs when a segment's append fails (``broker.segments.life``).
FAILED_APPEND = "ledger write failed"


# Each failed append is resolved before its answer (up to 15 s while the bookie
# still fails): longer than the default 120 s on a loaded machine.
@pytest.mark.timeout(400)
def test_librdkafka_through_failing_appends_delivers_every_record_once(
        bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    server = start_standalone(bookie_processes, tmp_path / "data", "--kafka-port", "0",
                              module=FAULTY)
    bootstrap = _bootstrap(server)
    topic = "idempotent-failures"
    create_topic(bootstrap, topic, 2)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "linger.ms": 2, "batch.num.messages": 20,
                         "message.timeout.ms": 120_000})
    delivered: dict[bytes, tuple[int, int]] = {}
    errors: list[KafkaError] = []

    def report(error: KafkaError | None, message: object) -> None:
        if error is not None:
            errors.append(error)
        else:
            delivered[message.value()] = (message.partition(), message.offset())  # type: ignore[attr-defined]

    # A thread fails the bookie's writes while batches flow, waits until an
    # append failed on it, heals it, and waits for records acknowledged since.
    stop = threading.Event()
    faults: list[int] = []

    def fault_once(acknowledged: int, failed: int) -> None:
        wait_for(lambda: len(delivered) >= acknowledged + ROUND or stop.is_set(),
                 "records acknowledged before a fault", timeout_s=3 * DEADLINE_S)
        _switch(server, signal.SIGUSR1, FAILING)
        wait_for(lambda: server.log().count(FAILED_APPEND) > failed or stop.is_set(),
                 "an append failed", timeout_s=DEADLINE_S)
        _switch(server, signal.SIGHUP, HEALED)
        faults.append(1)

    def faulter() -> None:
        while not stop.is_set() and len(faults) < FAULTS:
            fault_once(len(delivered), server.log().count(FAILED_APPEND))

    thread = threading.Thread(target=faulter)
    thread.start()
    try:
        for index in range(RECORDS):
            producer.produce(topic, value=b"%06d" % index, partition=index % 2,
                             on_delivery=report)
            producer.poll(0)
            if index % ROUND == ROUND - 1:
                assert producer.flush(DEADLINE_S * 2) == 0
    finally:
        stop.set()
        thread.join(DEADLINE_S)
    assert producer.flush(DEADLINE_S * 2) == 0
    assert errors == []
    assert len(faults) == FAULTS
    assert len(delivered) == RECORDS
    ends = segment_ends(server.address, topic, (0, 1))
    stored = read_partitions(bootstrap, topic, ends)
    check_delivered_once(delivered, stored, ends)
    for partition in (0, 1):  # in produce order
        assert [v for _, v in stored[partition]] == [
            b"%06d" % i for i in range(partition, RECORDS, 2)]
