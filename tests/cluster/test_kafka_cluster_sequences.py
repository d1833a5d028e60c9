"""A Kafka producer's sequences when its partition moves to another broker and back.

Real processes: ZooKeeper, 3 bookies (E=3/Qw=2/Qa=2), broker A alone, then
broker B joining (it takes the partition's container over gracefully) and
leaving (A takes it back). The producer writes through whichever broker owns
the partition. The state its batches are checked against is the segment's,
loaded by each new owner: so A, owning the partition again, takes the next
sequence after the ones B wrote (it used to refuse it with
OUT_OF_ORDER_SEQUENCE_NUMBER from what it remembered of its first ownership),
answers a resend of B's last batch with the offset B gave it, and refuses a
gap; everything is read back once, in order, up to the segment's end.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from broker.cluster.containers import container_of
from tests.integration.kafka.test_kafka_clients import create_topic
from tests.integration.kafka.test_kafka_idempotence import batch, init_producer_id, produce
from tests.support.bookies import BookieProcess, BookieProcesses
from tests.support.cluster import LocalCluster
from tests.support.cluster_load import COUNT, container_owner, wait_spread
from tests.support.kafka import kafka_address
from tests.support.kafka_check import read_partitions, segment_ends
from tests.support.wait import wait_for

#: Answers while the partition is between owners: nothing written, the client retries.
MOVING = (ErrorCode.not_leader_or_follower, ErrorCode.leader_not_available,
          ErrorCode.unknown_topic_or_partition)


def _connect(broker: BookieProcess) -> socket.socket:
    return socket.create_connection(kafka_address(broker), timeout=30)


def _produce_at_owner(broker: BookieProcess, topic: str, records: bytes,
                      ) -> tuple[ErrorCode, int]:
    """Produce to ``broker`` until it answers as the partition's owner."""
    answers: list[tuple[ErrorCode, int]] = []

    def owned() -> bool:
        with _connect(broker) as sock:
            answers.append(produce(sock, topic, records))
        return answers[-1][0] not in MOVING
    wait_for(owned, f"{kafka_address(broker)} answering for {topic}/0 as its owner")
    return answers[-1]


@pytest.mark.timeout(300)
def test_a_broker_that_gets_a_partition_back_checks_sequences_from_the_segment(
        zk_url: str, bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    cluster = LocalCluster(bookie_processes, zk_url, tmp_path)
    cluster.init(container_count=COUNT, ensemble_size=3, write_quorum=2, ack_quorum=2)
    for _ in range(3):
        cluster.start_bookie()
    a = cluster.start_broker("--kafka-port", "0")
    wait_spread(a.address, [COUNT])
    # A newcomer takes the highest containers: the partition's will move to B.
    topic = next(f"s{i}" for i in range(10_000)
                 if container_of(f"s{i}/0", COUNT) == COUNT - 1)
    create_topic("{}:{}".format(*kafka_address(a)), topic, 1)
    with _connect(a) as sock:
        producer_id, epoch = init_producer_id(sock)
    values = [[b"%d-%d" % (i, j) for j in range(2)] for i in range(9)]

    def send(broker: BookieProcess, i: int) -> tuple[ErrorCode, int]:
        return _produce_at_owner(broker, topic, batch(producer_id, epoch, 2 * i, values[i]))

    for i in range(3):  # A's first ownership: sequences 0-5
        assert send(a, i) == (ErrorCode.none, 2 * i)

    b = cluster.start_broker("--kafka-port", "0")
    wait_spread(a.address, [COUNT // 2] * 2)
    assert container_owner(a.address, f"{topic}/0") == b.address
    # B loads the segment: A's last batch again is answered with A's offset.
    assert send(b, 2) == (ErrorCode.none, 4)
    for i in range(3, 6):  # sequences 6-11, through B
        assert send(b, i) == (ErrorCode.none, 2 * i)

    assert b.terminate() == 0  # a graceful leave: A takes the container back
    wait_spread(a.address, [COUNT])
    # A owns the partition again: the next sequence (12) is taken, B's last
    # batch is answered with B's offset, and a gap is refused.
    assert send(a, 6) == (ErrorCode.none, 12)
    assert send(a, 5) == (ErrorCode.none, 10)
    code, _ = _produce_at_owner(a, topic, batch(producer_id, epoch, 16, values[8]))
    assert code == ErrorCode.out_of_order_sequence_number
    assert send(a, 7) == (ErrorCode.none, 14)

    ends = segment_ends(a.address, topic, (0,))
    assert ends == {0: 16}
    stored = read_partitions("{}:{}".format(*kafka_address(a)), topic, ends)
    assert [v for _, v in stored[0]] == [v for batch_values in values[:8] for v in batch_values]
