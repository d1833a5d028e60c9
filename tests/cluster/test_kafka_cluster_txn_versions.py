"""KIP-890 on a 3-broker cluster: transaction version 2, part 1's check across brokers.

Real processes (ZooKeeper, 3 bookies, 3 brokers with ``--kafka-port 0``), raw
requests (no installed client uses transaction version 2). Every broker
finalizes ``transaction.version`` 2: a partition's owner asks the transaction
coordinator on another broker to add the partition (Produce v12) or to check
it was added (part 1; ``broker.kafka.txns.cluster``, docs/kafka.md
"Transactions"). A TV2 producer adds partitions on all three brokers by
producing alone, EndTxn v5 bumps its epoch, the owners then take its batches at
the new epoch only (the old one: INVALID_PRODUCER_EPOCH); a ``read_committed``
consumer sees the committed transaction, not the aborted one. Its TxnOffsetCommit
v5 at a group another broker coordinates begins an offsets-only transaction (no
AddOffsetsToTxn), whose offset the group holds once committed. A TV1 producer's
batch to a partition it never added, owned by another broker than the
coordinator, is refused (INVALID_TXN_STATE before Produce v11,
TRANSACTION_ABORTABLE from it) and writes nothing; after its EndTxn (no bump) a
late Produce v12 adds nothing. The hop's lost answers (a fault wrapper at the
peers' seam) are ``tests/unit/broker/kafka/test_cluster_txn_adds.py``'s.
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
from tests.cluster.test_kafka_cluster_txn import DEADLINE_S, _committed_contents, _group_on
from tests.cluster.test_kafka_cluster_txn_heirs import _offset_fetch
from tests.integration.kafka.test_kafka_clients import create_topic
from tests.integration.kafka.test_kafka_txn_v2 import _batch, _make, _Wire
from tests.support.bookies import BookieProcesses
from tests.support.wait import wait_for

_TXN_ID = "kip890-cluster"
_TV1_ID = "kip890-cluster-tv1"
_TXN_TIMEOUT = datetime.timedelta(seconds=60)


def _connect(host_port: str) -> socket.socket:
    host, port = host_port.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=30)


def _init(wire: _Wire, transactional_id: str = _TXN_ID) -> tuple[int, int]:
    """InitProducerId at the coordinator, once its records are loaded (retried until then)."""
    answer: list[Any] = []

    def initialised() -> bool:
        init = wire.call(22, 4, _make(22, 4, transactional_id=transactional_id,
                                      transaction_timeout=_TXN_TIMEOUT))
        answer[:] = [init]
        return bool(init.error_code == ErrorCode.none)
    wait_for(initialised, "InitProducerId answered by the coordinator", timeout_s=DEADLINE_S)
    return int(answer[0].producer_id), int(answer[0].producer_epoch)


def _add(wire: _Wire, transactional_id: str, topic: str, producer_id: int, epoch: int,
         partitions: tuple[int, ...]) -> None:
    """AddPartitionsToTxn v3 (a TV1 client's) at the coordinator."""
    added = wire.call(24, 3, _make(
        24, 3, v3_and_below_transactional_id=transactional_id,
        v3_and_below_producer_id=producer_id, v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=(_make(24, 3, "AddPartitionsToTxnTopic", name=topic,
                                   partitions=partitions),)))
    assert {r.partition_error_code for t in added.results_by_topic_v3_and_below
            for r in t.results_by_partition} == {ErrorCode.none}


@pytest.mark.timeout(420)
def test_a_cluster_serves_version_2_and_checks_partitions_at_the_coordinator(
        zk_url: str, bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    brokers, kafka = _kafka_cluster(bookie_processes, zk_url, tmp_path)
    first = brokers[0].address
    topic = _spread_topic(first)
    create_topic(kafka[first], topic, PARTITIONS)
    for address in kafka.values():
        with _connect(address) as sock:
            versions = _Wire(sock).call(18, 4, _make(18, 4, client_software_name="t",
                                                     client_software_version="1"))
        assert ({(k.name, k.min_version, k.max_version) for k in versions.supported_features},
                {(k.name, k.min_version_level, k.max_version_level)
                 for k in versions.finalized_features}) == (
            {("transaction.version", 0, 2)}, {("transaction.version", 2, 2)})
    coordinator = lookup_owner(list(kafka), COORDINATOR_SEGMENT)
    owners = {p: lookup_owner(list(kafka), segment_name(topic, p)) for p in range(PARTITIONS)}
    assert len(set(owners.values())) == 3
    local = next(p for p, owner in owners.items() if owner == coordinator)
    remote = next(p for p, owner in owners.items() if owner != coordinator)
    sockets = {address: _connect(kafka[address]) for address in kafka}
    try:
        wires = {address: _Wire(sock) for address, sock in sockets.items()}
        txn = wires[coordinator]
        # TV2: the partitions on all three brokers added by producing (Produce v12).
        producer_id, epoch = _init(txn)
        for p, owner in owners.items():
            assert wires[owner].produce(12, _TXN_ID, topic, p, _batch(
                producer_id, epoch, 0, [b"kept-%d" % p]))[0] == ErrorCode.none
        ended = txn.end(5, _TXN_ID, producer_id, epoch, True)
        assert (ended.error_code, ended.producer_id, ended.producer_epoch) == (
            ErrorCode.none, producer_id, epoch + 1)
        # The next transaction at the bumped epoch, on every owner; the old epoch fenced.
        for p, owner in owners.items():
            assert wires[owner].produce(12, _TXN_ID, topic, p, _batch(
                producer_id, epoch + 1, 0, [b"dropped-%d" % p]))[0] == ErrorCode.none
            assert wires[owner].produce(12, _TXN_ID, topic, p, _batch(
                producer_id, epoch, 1, [b"zombie-%d" % p]))[0] == (
                ErrorCode.invalid_producer_epoch)
        aborted = txn.end(5, _TXN_ID, producer_id, epoch + 1, False)
        assert (aborted.error_code, aborted.producer_epoch) == (ErrorCode.none, epoch + 2)
        again = txn.end(5, _TXN_ID, producer_id, epoch + 1, False)
        assert (again.error_code, again.producer_epoch) == (ErrorCode.none, epoch + 2)
        # An offsets-only transaction: TxnOffsetCommit v5 at a group coordinated on another
        # broker begins it (no AddOffsetsToTxn); committed, the group holds the offset.
        group_broker = owners[remote]
        group = _group_on(group_broker, first, "kip890-g")
        offsets = wires[group_broker].call(28, 5, _make(
            28, 5, transactional_id=_TXN_ID, group_id=group, producer_id=producer_id,
            producer_epoch=epoch + 2, generation_id=-1, member_id="", group_instance_id=None,
            topics=(_make(28, 5, "TxnOffsetCommitRequestTopic", name=topic, partitions=(
                _make(28, 5, "TxnOffsetCommitRequestPartition", partition_index=remote,
                      committed_offset=2, committed_leader_epoch=-1,
                      committed_metadata=None),)),)))
        assert offsets.topics[0].partitions[0].error_code == ErrorCode.none
        ended = txn.end(5, _TXN_ID, producer_id, epoch + 2, True)
        assert (ended.error_code, ended.producer_epoch) == (ErrorCode.none, epoch + 3)
        assert _offset_fetch(kafka[group_broker], group, topic, remote) == (0, 0, 2)

        # TV1: part 1 refuses a partition never added, on another broker than the coordinator.
        tv1_id, tv1_epoch = _init(txn, _TV1_ID)
        for version, refusal in ((8, ErrorCode.invalid_txn_state),
                                 (11, ErrorCode.transaction_abortable)):
            assert wires[owners[remote]].produce(version, _TV1_ID, topic, remote, _batch(
                tv1_id, tv1_epoch, 0, [b"never-%d" % version]))[0] == refusal
        _add(txn, _TV1_ID, topic, tv1_id, tv1_epoch, (local,))
        assert wires[owners[remote]].produce(8, _TV1_ID, topic, remote, _batch(
            tv1_id, tv1_epoch, 0, [b"not-added"]))[0] == ErrorCode.invalid_txn_state
        assert wires[owners[local]].produce(8, _TV1_ID, topic, local, _batch(
            tv1_id, tv1_epoch, 0, [b"tv1-kept"]))[0] == ErrorCode.none
        assert txn.end(3, _TV1_ID, tv1_id, tv1_epoch, True).error_code == ErrorCode.none
        # Ended without a bump: a late v12 batch opens no transaction (KIP-890's hanging one).
        assert wires[owners[remote]].produce(12, _TV1_ID, topic, remote, _batch(
            tv1_id, tv1_epoch, 0, [b"late"]))[0] == ErrorCode.transaction_abortable
    finally:
        for sock in sockets.values():
            sock.close()
    contents = _committed_contents(",".join(kafka.values()), topic)
    assert sorted(contents) == sorted([b"kept-%d" % p for p in range(PARTITIONS)]
                                      + [b"tv1-kept"])
