"""KIP-890 on a 3-broker cluster: transaction version 1 only, EndTxn v5's bump at the coordinator.

Real processes (ZooKeeper, 3 bookies, 3 brokers with ``--kafka-port 0``). A
cluster's partition owners do not add partitions to a transaction (docs/kafka.md,
"Transactions", KIP-890), so no broker finalizes ``transaction.version``: clients
stay at version 1. EndTxn v5 is still answered by the transaction coordinator
with the bumped epoch, and the partition owners on the other brokers then take
the producer's batches at the new epoch only (the old one: INVALID_PRODUCER_EPOCH);
a ``read_committed`` consumer sees the committed transaction, not the aborted one.
"""

from __future__ import annotations

import datetime
import socket
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from bench._cluster_client import lookup_owner
from broker.cluster.containers import COORDINATOR_SEGMENT
from broker.kafka.partitions import segment_name
from tests.cluster.test_kafka_cluster import PARTITIONS, _kafka_cluster, _spread_topic
from tests.cluster.test_kafka_cluster_txn import DEADLINE_S, _committed_contents
from tests.integration.kafka.test_kafka_clients import create_topic
from tests.integration.kafka.test_kafka_txn_v2 import _batch, _make, _Wire
from tests.support.bookies import BookieProcesses
from tests.support.wait import wait_for

_TXN_ID = "kip890-cluster"
_TXN_TIMEOUT = datetime.timedelta(seconds=60)


def _connect(host_port: str) -> socket.socket:
    host, port = host_port.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=30)


def _init(wire: _Wire) -> tuple[int, int]:
    """InitProducerId at the coordinator, once its records are loaded (retried until then)."""
    answer: list[Any] = []

    def initialised() -> bool:
        init = wire.call(22, 4, _make(22, 4, transactional_id=_TXN_ID,
                                      transaction_timeout=_TXN_TIMEOUT))
        answer[:] = [init]
        return bool(init.error_code == ErrorCode.none)
    wait_for(initialised, "InitProducerId answered by the coordinator", timeout_s=DEADLINE_S)
    return int(answer[0].producer_id), int(answer[0].producer_epoch)


def _add_all(wire: _Wire, topic: str, producer_id: int, epoch: int) -> None:
    added = wire.call(24, 3, _make(
        24, 3, v3_and_below_transactional_id=_TXN_ID, v3_and_below_producer_id=producer_id,
        v3_and_below_producer_epoch=epoch, v3_and_below_topics=(_make(
            24, 3, "AddPartitionsToTxnTopic", name=topic,
            partitions=tuple(range(PARTITIONS))),)))
    assert {r.partition_error_code for t in added.results_by_topic_v3_and_below
            for r in t.results_by_partition} == {ErrorCode.none}


@pytest.mark.timeout(420)
def test_a_cluster_stays_at_version_1_and_its_owners_follow_the_bumped_epoch(
        zk_url: str, bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    brokers, kafka = _kafka_cluster(bookie_processes, zk_url, tmp_path)
    first = brokers[0].address
    topic = _spread_topic(first)
    create_topic(kafka[first], topic, PARTITIONS)
    for address in kafka.values():
        with _connect(address) as sock:
            versions = _Wire(sock).call(18, 4, _make(18, 4, client_software_name="t",
                                                     client_software_version="1"))
        assert (versions.supported_features, versions.finalized_features) == ((), ())
    coordinator = lookup_owner(list(kafka), COORDINATOR_SEGMENT)
    owners = {p: lookup_owner(list(kafka), segment_name(topic, p)) for p in range(PARTITIONS)}
    assert len(set(owners.values())) == 3
    sockets = {address: _connect(kafka[address]) for address in kafka}
    try:
        wires = {address: _Wire(sock) for address, sock in sockets.items()}
        txn = wires[coordinator]
        producer_id, epoch = _init(txn)
        _add_all(txn, topic, producer_id, epoch)
        for p, owner in owners.items():
            assert wires[owner].produce(8, _TXN_ID, topic, p, _batch(
                producer_id, epoch, 0, [b"kept-%d" % p]))[0] == ErrorCode.none
        ended = txn.end(5, _TXN_ID, producer_id, epoch, True)
        assert (ended.error_code, ended.producer_id, ended.producer_epoch) == (
            ErrorCode.none, producer_id, epoch + 1)
        # The next transaction at the bumped epoch, on every owner; the old epoch fenced.
        _add_all(txn, topic, producer_id, epoch + 1)
        for p, owner in owners.items():
            assert wires[owner].produce(8, _TXN_ID, topic, p, _batch(
                producer_id, epoch + 1, 0, [b"dropped-%d" % p]))[0] == ErrorCode.none
            assert wires[owner].produce(8, _TXN_ID, topic, p, _batch(
                producer_id, epoch, 1, [b"zombie-%d" % p]))[0] == (
                ErrorCode.invalid_producer_epoch)
        aborted = txn.end(5, _TXN_ID, producer_id, epoch + 1, False)
        assert (aborted.error_code, aborted.producer_epoch) == (ErrorCode.none, epoch + 2)
        again = txn.end(5, _TXN_ID, producer_id, epoch + 1, False)
        assert (again.error_code, again.producer_epoch) == (ErrorCode.none, epoch + 2)
    finally:
        for sock in sockets.values():
            sock.close()
    contents = _committed_contents(",".join(kafka.values()), topic)
    assert sorted(contents) == sorted(b"kept-%d" % p for p in range(PARTITIONS))
