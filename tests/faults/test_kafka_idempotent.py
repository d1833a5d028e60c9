"""An idempotent Kafka producer (librdkafka) through a proxy that cuts its connections.

The broker advertises the proxy's port (``--kafka-advertised-port``), so
every connection of the producer goes through it. Connections are reset
while batches are in flight: librdkafka resends what it has no answer for,
the segments drop what they already hold (writer ``kafka:<id>:<epoch>``,
event numbers = sequences), and every acknowledged record is in its
partition exactly once, in order, at the offset its delivery report gave:
checked against a read-back (kafka-python) up to the segments' end offsets
(gRPC Admin), so a trailing duplicate fails the test.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer

from tests.integration.kafka.test_kafka_clients import DEADLINE_S, create_topic
from tests.support.bookies import BookieProcesses
from tests.support.kafka import kafka_address
from tests.support.kafka_check import check_delivered_once, read_partitions, segment_ends
from tests.support.proxy import TcpProxy
from tests.support.standalone import start_standalone

pytestmark = pytest.mark.faults

RECORDS = 6000
ROUND = 50
CUT_INTERVAL_S = 0.03
MAX_CUTS = 100


def test_idempotent_producer_survives_cut_connections_without_duplicates(
        bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    with TcpProxy("127.0.0.1", 9) as proxy:
        server = start_standalone(bookie_processes, tmp_path / "data", "--kafka-port", "0",
                                  "--kafka-advertised-port", str(proxy.port))
        proxy.retarget(kafka_address(server)[1])
        bootstrap = proxy.address
        create_topic(bootstrap, "idempotent", 2)
        producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                             "linger.ms": 2, "batch.num.messages": 50,
                             "message.timeout.ms": 120_000})
        offsets: dict[bytes, tuple[int, int]] = {}
        errors: list[KafkaError] = []

        def report(error: KafkaError | None, message: object) -> None:
            if error is not None:
                errors.append(error)
            else:
                offsets[message.value()] = (message.partition(), message.offset())  # type: ignore[attr-defined]

        # A thread resets the connections every few ms while batches flow, so
        # some cuts fall between a batch's append and its answer.
        stop = threading.Event()
        cuts: list[int] = []

        def cutter() -> None:
            while not stop.wait(CUT_INTERVAL_S) and len(cuts) < MAX_CUTS:
                cuts.append(proxy.cut())

        thread = threading.Thread(target=cutter)
        thread.start()
        try:
            for index in range(RECORDS):
                producer.produce("idempotent", value=b"%06d" % index, partition=index % 2,
                                 on_delivery=report)
                if index % ROUND == ROUND - 1:
                    # Waiting for each round's answers keeps batches in flight
                    # (sent, appending, answering) most of the time.
                    assert producer.flush(DEADLINE_S) == 0
        finally:
            stop.set()
            thread.join(DEADLINE_S)
        assert errors == []
        assert sum(cuts) > 0
        assert len(offsets) == RECORDS
        # Read back up to the segments' ends (the gRPC Admin API's, not Kafka's):
        # a trailing duplicate (the last batch resent after a cut) is read too.
        ends = segment_ends(server.address, "idempotent", (0, 1))
        stored = read_partitions(bootstrap, "idempotent", ends)
        check_delivered_once(offsets, stored, ends)
        for partition in (0, 1):
            # Exactly once, in produce order, at offsets 0, 1, 2 ...
            assert [v for _, v in stored[partition]] == [
                b"%06d" % i for i in range(partition, RECORDS, 2)]
