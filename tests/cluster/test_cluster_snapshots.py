"""Transaction-buffer snapshots in a cluster: written by each segment's owner only, moved with it.

Real processes (ZooKeeper, 3 bookies E=3/Qw=2/Qa=2, 3 brokers snapshotting
after every change), raw gRPC stubs. Segments on every broker take appends,
so every broker writes snapshots: each into the snapshot segment of its own
containers (``_txnbuffer_snapshots/<n>`` is in container ``n``). A segment
next to the coordinator takes an aborted and a committed transaction
(transactions reach only the coordinator's broker's segments for now,
docs/cluster.md); its owner is SIGKILLed, and the new owner recovers the
aborted set from the snapshot it now owns; then that owner stops (SIGTERM) and
the last broker, handed the container, recovers from it too. No snapshot write
was ever refused for a fence (the counters each broker exports), and each
broker opened only the snapshot segments of containers it owned.
"""

from __future__ import annotations

import re
import urllib.request
from collections.abc import Sequence
from pathlib import Path

import grpc
import pytest

from bench._cluster_client import list_brokers, lookup_owner, read_segment
from broker.cluster.containers import SNAPSHOT_TOPIC, container_of
from broker.system.records import decode_record as decode_system_record
from folio.api.v1 import (
    append_pb2,
    append_pb2_grpc,
    events_pb2,
    read_pb2,
    read_pb2_grpc,
    transactions_pb2,
    transactions_pb2_grpc,
)
from tests.cluster.test_failover import _create_topic_named
from tests.support.bookies import BookieProcess, BookieProcesses
from tests.support.cluster import LocalCluster
from tests.support.cluster_load import COUNT
from tests.support.cluster_load import wait_spread as _spread
from tests.support.wait import wait_for
from txnbuffer.snapshot import decode_record as decode_snapshot_record

COORDINATOR = container_of("_txnlog/0", COUNT)
#: Snapshot after every change, and look for due snapshots often.
SNAPSHOT_FLAGS = ("--txn-snapshot-every-changes", "1", "--txn-snapshot-every-ms", "100",
                  "--retention-interval-s", "0.2")
#: Plain (non-transactional) segments per broker: their buffers snapshot too.
PLAIN_PER_BROKER = 2


def _append(address: str, segment: str, writer: str, number: int, payload: bytes,
            txn_id: bytes = b"") -> str:
    block = events_pb2.EventBlock(format_version=1, payloads=[payload])
    with grpc.insecure_channel(address) as channel:
        replies = append_pb2_grpc.AppendStub(channel).Append(iter([
            append_pb2.AppendCommand(request_id=1 << 32, setup_append=append_pb2.SetupAppend(
                segment=segment, writer_id=writer, txn_id=txn_id)),
            append_pb2.AppendCommand(request_id=(1 << 32) | 1, append_block=append_pb2.AppendBlock(
                data=block.SerializeToString(), event_count=1, last_event_number=number,
                end=True))]), timeout=30)
        return [reply.WhichOneof("reply") or "" for reply in replies][-1]


def _snapshot_records(owner: str, segment: str) -> dict[str, int]:
    """Aborts held by each live snapshot record of ``segment``, read from its snapshot segment."""
    snapshots = f"{SNAPSHOT_TOPIC}/{container_of(segment, COUNT)}"
    live: dict[str, bytes | None] = {}
    with grpc.insecure_channel(owner) as channel:
        stub = read_pb2_grpc.ReadStub(channel)
        offset = 0
        while True:
            responses = stub.Read(read_pb2.ReadRequest(segment=snapshots, offset=offset,
                                                       max_wait_ms=1), timeout=30)
            end = offset
            for response in responses:
                for block in response.blocks:
                    record = decode_system_record(block.data)
                    live[record.key] = record.value
                offset = response.next_offset or offset
                end = response.end_offset
                if offset >= end:
                    break
            responses.cancel()  # type: ignore[no-untyped-call]  # grpc-stubs: cancel() unannotated
            if offset >= end:
                break
    return {key: decode_snapshot_record(key, value).count for key, value in live.items()
            if value is not None and key.startswith(f"{segment}-")}


def _has_snapshot(brokers: Sequence[str], segment: str, aborts: int) -> bool:
    try:
        records = _snapshot_records(lookup_owner(brokers, segment), segment)
    except grpc.RpcError:  # the snapshot topic is not there yet
        return False
    return sum(records.values()) >= aborts and f"{segment}-end" in records


def _metrics(broker: BookieProcess) -> dict[str, float]:
    """The broker's Prometheus samples (its ready line names the endpoint)."""
    url = re.search(r"metrics on (http://\S+/metrics)", broker.ready_line)
    assert url is not None, broker.ready_line
    with urllib.request.urlopen(url.group(1), timeout=10) as reply:
        text = reply.read().decode()
    samples: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("folio_txn_snapshot_"):
            name, _, value = line.rpartition(" ")
            samples[name] = float(value)
    return samples


def _check_only_owners_wrote(brokers: Sequence[BookieProcess]) -> dict[str, set[int]]:
    """No fenced snapshot write anywhere; each broker opened only containers it owns now."""
    owned = {b.address: set(b.containers)
             for b in list_brokers(brokers[0].address).brokers}
    opened: dict[str, set[int]] = {}
    for broker in brokers:
        samples = _metrics(broker)
        fenced = {name: value for name, value in samples.items()
                  if name.startswith("folio_txn_snapshot_fenced_writes_total") and value}
        assert fenced == {}, (broker.address, fenced)
        opened[broker.address] = {
            int(match.group(1)) for name, value in samples.items() if value
            for match in [re.fullmatch(
                r'folio_txn_snapshot_segment_opens_total\{container="(\d+)"\}', name)]
            if match}
        assert opened[broker.address] <= owned[broker.address], (broker.address, opened, owned)
    return opened


def _begin(coordinator: str) -> bytes:
    with grpc.insecure_channel(coordinator) as channel:
        return transactions_pb2_grpc.TransactionsStub(channel).BeginTxn(
            transactions_pb2.BeginTxnRequest(timeout_ms=120_000), timeout=10).txn_id


@pytest.mark.timeout(300)
def test_each_owner_writes_its_snapshots_and_a_new_owner_recovers_from_them(
        zk_url: str, bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    cluster = LocalCluster(bookie_processes, zk_url, tmp_path)
    cluster.init(container_count=COUNT, ensemble_size=3, write_quorum=2, ack_quorum=2)
    for _ in range(3):
        cluster.start_bookie()
    brokers = [cluster.start_broker(*SNAPSHOT_FLAGS) for _ in range(3)]
    addresses = [b.address for b in brokers]
    _spread(addresses[0], [COUNT // 3] * 3)
    # A segment in the coordinator's container; plain segments on every broker.
    topic = next(f"tx{i}" for i in range(1000) if container_of(f"tx{i}/0", COUNT) == COORDINATOR)
    _create_topic_named(addresses[0], topic, 1)
    segment = f"{topic}/0"
    plain = []
    for listed in list_brokers(addresses[0]).brokers:
        for container in list(listed.containers)[:PLAIN_PER_BROKER]:
            name = next(f"plain{i}" for i in range(10_000)
                        if container_of(f"plain{i}/0", COUNT) == container)
            _create_topic_named(addresses[0], name, 1)
            plain.append(f"{name}/0")
    owners = {name: lookup_owner(addresses, name) for name in [segment, *plain]}
    coordinator = owners[segment]
    assert len(set(owners.values())) == 3, owners  # snapshots on every broker
    for number, name in enumerate(plain):
        assert _append(owners[name], name, "plain-writer", number, b"p") == "data_appended"
    aborted, committed = _begin(coordinator), _begin(coordinator)
    assert _append(coordinator, segment, "aborted", 0, b"aborted", aborted) == "data_appended"
    assert _append(coordinator, segment, "committed", 0, b"kept", committed) == "data_appended"
    with grpc.insecure_channel(coordinator) as channel:
        stub = transactions_pb2_grpc.TransactionsStub(channel)
        stub.AbortTxn(transactions_pb2.AbortTxnRequest(txn_id=aborted), timeout=30)
        stub.CommitTxn(transactions_pb2.CommitTxnRequest(txn_ids=[committed]), timeout=30)
    for name in plain:
        wait_for(lambda name=name: _has_snapshot(addresses, name, 0),  # type: ignore[misc]
                 f"a snapshot of {name} by its owner", 60)
    wait_for(lambda: _has_snapshot(addresses, segment, 1),
             f"a snapshot of {segment} holding its abort", 60)
    opened = _check_only_owners_wrote(brokers)
    assert {container_of(name, COUNT) for name in plain
            if owners[name] != coordinator} <= set().union(
        *(opened[a] for a in addresses if a != coordinator))

    victim = next(b for b in brokers if b.address == coordinator)
    victim.kill()
    survivors = [b for b in brokers if b is not victim]
    survivor_addresses = [b.address for b in survivors]
    wait_for(lambda: lookup_owner(survivor_addresses, segment) in survivor_addresses,
             f"a new owner of {segment}", 60)
    # read_committed on the new owner: the aborted event stays hidden.
    assert read_segment(survivor_addresses, segment, committed=True) == [b"kept"]
    assert read_segment(survivor_addresses, segment) == [b"aborted", b"kept"]
    new_owner = next(b for b in survivors if b.address == lookup_owner(survivor_addresses,
                                                                       segment))
    # ... recovered from the snapshot the new owner holds now, not by a replay.
    assert re.search(rf"segment {re.escape(segment)}: transaction buffer recovered in "
                     r"[\d.]+ s: 1 aborts from the snapshot", new_owner.log()), new_owner.log()
    opened = _check_only_owners_wrote(survivors)
    assert container_of(segment, COUNT) in opened[new_owner.address]

    # A graceful handover (SIGTERM): the last broker takes the container, snapshot and all.
    new_owner.terminate()
    last = next(b for b in survivors if b is not new_owner)
    wait_for(lambda: lookup_owner([last.address], segment) == last.address,
             f"{last.address} owns {segment}", 60)
    assert read_segment([last.address], segment, committed=True) == [b"kept"]
    assert re.search(rf"segment {re.escape(segment)}: transaction buffer recovered in "
                     r"[\d.]+ s: 1 aborts from the snapshot", last.log()), last.log()
    assert container_of(segment, COUNT) in _check_only_owners_wrote([last])[last.address]
