"""A keyed idempotent producer through cut connections while its topic splits and merges.

The broker advertises a proxy's port, and a thread resets the producer's
connections every few ms while partition 0 is split and its halves merged:
librdkafka resends batches it has no answer for, some of them after the
partition they were sent to was sealed. A resend of a batch the sealed
partition holds must be answered as written, one its heir holds dropped there
(the producer's sequence state follows it, docs/kafka.md "Partitions and
scaling"): every delivered record is read back exactly once, each stream (key
and the partition the producer chose) in order.
"""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path

import pytest

import folio
from tests.integration.kafka.test_kafka_clients import DEADLINE_S, create_topic
from tests.integration.kafka.test_kafka_scaling import (
    KeyedProducer,
    assert_in_stream_order,
    kafka_read_back,
    sdk_read_back,
)
from tests.support.bookies import BookieProcesses
from tests.support.kafka import kafka_address
from tests.support.proxy import TcpProxy
from tests.support.standalone import start_standalone

pytestmark = pytest.mark.faults

CUT_INTERVAL_S = 0.03
MAX_CUTS = 200


def test_resends_across_a_split_and_a_merge_are_stored_once(
        bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    with TcpProxy("127.0.0.1", 9) as proxy:
        server = start_standalone(bookie_processes, tmp_path / "data", "--kafka-port", "0",
                                  "--kafka-advertised-port", str(proxy.port))
        proxy.retarget(kafka_address(server)[1])
        bootstrap = proxy.address
        topic = "cut-scaled"
        create_topic(bootstrap, topic, 2)
        # librdkafka refreshes its metadata when a connection is lost: it
        # then sees the new partitions and moves keys to them, so order is
        # checked per stream (key and the partition the producer chose).
        producer = KeyedProducer(bootstrap, topic, **{"batch.num.messages": 50})
        stop = threading.Event()
        cuts: list[int] = []

        def cutter() -> None:
            while not stop.wait(CUT_INTERVAL_S) and len(cuts) < MAX_CUTS:
                cuts.append(proxy.cut())

        cutting = threading.Thread(target=cutter)
        producer.thread.start()
        cutting.start()
        try:
            with folio.Client(server.address, timeout_s=30) as client:
                producer.wait_for_more(300)
                client.scale_topic(topic, [f"{topic}/0"], [(0.0, 0.25), (0.25, 0.5)])
                producer.wait_for_more(300, partition=0)
                client.scale_topic(topic, [f"{topic}/2", f"{topic}/3"], [(0.0, 0.5)])
                producer.wait_for_more(300, partition=0)
                stop.set()
                cutting.join(DEADLINE_S)
                delivered = producer.finish()
                assert producer.errors == []
                assert sum(cuts) > 0
                expected = Counter((key, number) for key, number, _ in delivered)
                assert max(expected.values()) == 1
                through_kafka = kafka_read_back(bootstrap, topic)
                assert Counter(through_kafka) == expected
                assert_in_stream_order(through_kafka, delivered, per_key=False)
                through_sdk = sdk_read_back(client, topic, len(delivered))
                assert Counter(through_sdk) == expected
                assert_in_stream_order(through_sdk, delivered, per_key=False)
        finally:
            stop.set()
            cutting.join(DEADLINE_S)
            producer.stop.set()
