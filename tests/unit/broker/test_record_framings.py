"""The broker's JSON records in the one framing (ledger/records.py), and as earlier builds wrote.

Each ``EARLIER`` value is the exact bytes a build before the shared framing
wrote: the version under ``"v"``, ``"version"`` or ``"format"``, or none at all.
They must still load; what is written now carries ``format_version``. (The
transaction log's earlier records are read back by
tests/unit/broker/txn/test_txn_coordinator.py, which writes them with ``"v"``.)
"""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

import pytest

from broker.auth.permissions import AclTable, Action, Grant, ResourceKind
from broker.cluster.containers import OwnerRecord
from broker.groups.heartbeats import HeartbeatBoard, _path
from broker.kafka.consumer_groups.offsets import CommittedOffset, ConsumerGroupRecord
from broker.kafka.sasl.credentials import decode_table, encode_table
from broker.kafka.sasl.scram import ScramCredential
from broker.kafka.txns.records import TxnProducer
from broker.txn.commit_keys import _Record
from broker.txn.states import Txn, TxnState
from ledger.metadata.rocksdb_store import RocksDBMetadataStore
from ledger.records import VERSION_KEY

TXN = (1, 2)
TXN_HEX = "00000000000000010000000000000002"

EARLIER_COMMIT_KEY = (b'{"v": 1, "sequence": 3, "txns": ["' + TXN_HEX.encode()
                      + b'"], "done": true}')
EARLIER_PRODUCER = (b'{"v": 1, "producer_id": 5, "epoch": 1, "timeout_ms": 60000, "txn_id": "'
                    + TXN_HEX.encode() + b'", "offsets": [["g", "t", 0, 4, 1, "m"]]}')
EARLIER_OFFSET = b'{"v": 1, "offset": 4, "epoch": 1, "metadata": "m", "time_ms": 77}'
EARLIER_GROUP = b'{"v": 1, "generation": 3, "protocol_type": "consumer", "protocol_name": "range"}'
EARLIER_OWNER = (b'{"version": 1, "id": "b1", "address": "h:1", "incarnation": "inc", '
                 b'"kafka": "h:9"}')
EARLIER_PERMISSIONS = (b'{"version":1,"grants":[{"role":"r","kind":"topic","pattern":"t",'
                       b'"actions":["produce"]}]}')
EARLIER_SCRAM = (b'{"format": 1, "users": {"u": {"SCRAM-SHA-256": {"iterations": 4096, '
                 b'"salt": "cw==", "server_key": "dg==", "stored_key": "aw=="}}}}')
EARLIER_HEARTBEAT = b'{"session_id": "s1", "offsets": {"t/0": 7}}'

GRANT = Grant("r", ResourceKind.TOPIC, "t", frozenset({Action.PRODUCE}))
SCRAM = {"u": {"SCRAM-SHA-256": ScramCredential("SCRAM-SHA-256", b"s", b"k", b"v", 4096)}}


def _framed(data: bytes, legacy_key: str | None = None) -> dict[str, object]:
    """The record in ``data``, checked: ``format_version`` 1, and the earlier key only if asked."""
    record = json.loads(data)
    assert isinstance(record, dict)
    assert record[VERSION_KEY] == 1
    # An earlier build's reader checked its own key: it is written too (rolling upgrades).
    assert {key for key in ("v", "version", "format") if key in record} \
        == ({legacy_key} if legacy_key else set())
    if legacy_key:
        assert record[legacy_key] == 1
    return record


def test_records_of_earlier_builds_still_load() -> None:
    assert _Record.decode("k", EARLIER_COMMIT_KEY) == _Record(3, (TXN,), True)
    producer = TxnProducer.decode("t/tid", EARLIER_PRODUCER)
    assert (producer.producer_id, producer.epoch, producer.timeout_ms, producer.txn_id) \
        == (5, 1, 60000, TXN)
    assert producer.offsets == {("g", "t", 0): CommittedOffset(4, 1, "m")}
    assert CommittedOffset.decode(EARLIER_OFFSET) == CommittedOffset(4, 1, "m", 77)
    assert ConsumerGroupRecord.decode(EARLIER_GROUP) == ConsumerGroupRecord(3, "consumer", "range")
    assert OwnerRecord.from_bytes(EARLIER_OWNER) == OwnerRecord("b1", "h:1", "inc", "h:9")
    assert AclTable.decode(EARLIER_PERMISSIONS, 4).grants == (GRANT,)
    assert decode_table(EARLIER_SCRAM) == SCRAM


def test_records_are_written_with_format_version_and_read_back() -> None:
    record = _Record(3, (TXN,), True)
    assert _Record.decode("k", record.encode()) == record
    producer = TxnProducer("tid", 5, 1, 60000, TXN, {("g", "t", 0): CommittedOffset(4, 1, "m")})
    again = TxnProducer.decode("t/tid", producer.encode())  # compared by identity: fields
    assert [getattr(again, f.name) for f in fields(TxnProducer)] \
        == [getattr(producer, f.name) for f in fields(TxnProducer)]
    offset, group = CommittedOffset(4, 1, "m", 77), ConsumerGroupRecord(3, "consumer", "range")
    assert CommittedOffset.decode(offset.encode()) == offset
    assert ConsumerGroupRecord.decode(group.encode()) == group
    owner = OwnerRecord("b1", "h:1", "inc", "h:9")
    assert OwnerRecord.from_bytes(owner.to_bytes()) == owner
    table = AclTable([GRANT], 0)
    assert AclTable.decode(table.encode(), 0).grants == (GRANT,)
    assert decode_table(encode_table(SCRAM)) == SCRAM
    txn_record = Txn(TXN, TxnState.OPEN, 1000, ["t/0"], label="job").record()
    for data in (record.encode(), producer.encode(), offset.encode(), group.encode(),
                 txn_record):
        _framed(data, legacy_key="v")
    _framed(table.encode(), legacy_key="version")
    # Earlier readers of these never checked a version: one key.
    _framed(owner.to_bytes())
    _framed(encode_table(SCRAM))


def test_unknown_formats_are_refused_as_before() -> None:
    for decode, data in ((lambda d: _Record.decode("k", d), b'{"v": 2, "sequence": 1}'),
                         (CommittedOffset.decode, b'{"format_version": 2, "offset": 1}'),
                         (ConsumerGroupRecord.decode, b'{"generation": 1}'),
                         (decode_table, b'{"format": 2, "users": {}}')):
        with pytest.raises(ValueError):
            decode(data)
    with pytest.raises(ValueError, match="format 2"):
        AclTable.decode(b'{"version": 2, "grants": []}', 1)
    # An unreadable owner record is an owner with no known address, never a crash.
    assert OwnerRecord.from_bytes(b'{"version": 2, "id": "b1"}') == OwnerRecord("", "")


async def test_heartbeats_of_earlier_builds_had_no_version_and_still_read(
        tmp_path: Path) -> None:
    store = RocksDBMetadataStore(str(tmp_path / "metadata"))
    try:
        board = HeartbeatBoard(store)
        await store.create(_path("g", "r1"), EARLIER_HEARTBEAT, make_parents=True)
        earlier = await board.read("g", "r1")
        assert earlier is not None and (earlier.session_id, earlier.offsets) == ("s1", {"t/0": 7})
        await board.write("g", "r2", "s2", {"t/1": 3})
        node = await store.get(_path("g", "r2"))
        assert _framed(node.data)["session_id"] == "s2"
        now = await board.read("g", "r2")
        assert now is not None and (now.session_id, now.offsets) == ("s2", {"t/1": 3})
    finally:
        await store.close()
