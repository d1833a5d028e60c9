"""System topics are the broker's state: every public write is refused, the broker restarts.

For every system topic and every public call that would write it, the exact
refusal (PERMISSION_DENIED, ``InternalTopicError``, a message naming the topic
as internal), then a restart of a real ``folio standalone`` on the same data
dir after which transactions still begin and a replayed idempotent commit is
still a duplicate. Reading the system topics stays possible. Last, records no
decoder can read, put into the system topics through the broker's own
components (not the public API), are logged with their position and skipped
or quarantined, and the broker still starts and serves transactions.
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from broker.api import Block
from broker.app.standalone import MAX_ENTRY_BYTES
from broker.system.records import encode_record, max_value_bytes
from broker.system.snapshot_store import SNAPSHOT_TOPIC, snapshot_store
from broker.topics.manager import TopicManager
from broker.txn.commit_keys import COMMIT_KEYS_TOPIC
from broker.txn.coordinator import TXN_LOG_TOPIC
from folio.api.v1 import (
    admin_pb2,
    admin_pb2_grpc,
    append_pb2,
    append_pb2_grpc,
    read_pb2,
    read_pb2_grpc,
    transactions_pb2,
    transactions_pb2_grpc,
)
from ledger.bookie.bookie import Bookie
from ledger.client.directory import BookieDirectory
from ledger.client.ledger_client import LedgerClient
from ledger.config import BookieConfig, LedgerConfig
from ledger.metadata.rocksdb_store import RocksDBMetadataStore
from tests.support.bookies import BookieProcess, BookieProcesses, folio_argv, folio_env
from tests.support.standalone import append_payloads, read_available, start_standalone

SYSTEM_TOPICS = (TXN_LOG_TOPIC, COMMIT_KEYS_TOPIC, SNAPSHOT_TOPIC)
_Code = grpc.StatusCode
_CODES = {code.value[0]: code for code in grpc.StatusCode}


class Broker:
    """A standalone on one data dir that a test restarts, with stubs of its current address."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self._processes = BookieProcesses()
        self.process: BookieProcess | None = None
        self.channel: grpc.Channel  # set by start(), which runs here
        self.start()

    def start(self) -> None:
        self.process = start_standalone(self._processes, self.data_dir)
        self.channel = grpc.insecure_channel(self.process.address)
        self.admin = admin_pb2_grpc.AdminStub(self.channel)
        self.produce = append_pb2_grpc.ProduceStub(self.channel)
        self.txns = transactions_pb2_grpc.TransactionsStub(self.channel)

    def stop(self) -> None:
        assert self.process is not None
        self.channel.close()
        assert self.process.terminate() == 0, self.process.log()[-3000:]

    def restart(self) -> None:
        self.stop()
        self.start()

    def close(self) -> None:
        try:
            if self.process is not None and self.process.running():
                self.stop()
        finally:
            self._processes.kill_all()

    def log(self) -> str:
        assert self.process is not None
        return self.process.log()

    def begin(self) -> bytes:
        return bytes(self.txns.BeginTxn(transactions_pb2.BeginTxnRequest(), timeout=30).txn_id)

    def commit_once(self, sequence: int) -> bool:
        """Write one event in a new transaction, commit it as (``KEY``, sequence): duplicate?"""
        txn_id = self.begin()
        replies = append_payloads(self.channel, "user/0", f"w-{txn_id.hex()}",
                                  [[f"batch-{sequence}".encode()]], txn_id=txn_id)
        assert replies[-1].WhichOneof("reply") == "data_appended", replies[-1]
        response = self.txns.CommitTxn(transactions_pb2.CommitTxnRequest(
            txn_ids=[txn_id], commit_key=KEY, commit_sequence=sequence), timeout=30)
        return bool(response.duplicate)


KEY = "query-1"


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    made = Broker(tmp_path / "data")
    try:
        made.admin.CreateTopic(admin_pb2.CreateTopicRequest(name="user"), timeout=30)
        assert made.commit_once(0) is False  # committed: makes every system topic exist
        yield made
    finally:
        made.close()


def _refusal(call: Callable[..., Any], request: Any) -> tuple[grpc.StatusCode, str, str]:
    with pytest.raises(grpc.RpcError) as raised:
        call(request, timeout=30)
    error: Any = raised.value
    name = dict(error.trailing_metadata() or ()).get("folio-error", "")
    return error.code(), error.details(), name


def _attempts(broker: Broker, topic: str) -> list[tuple[str, Callable[[], tuple[Any, str, str]]]]:
    """Each public write of ``topic``: its action name and a call giving (code, message, name)."""
    segment = f"{topic}/0"

    def append(txn: bool) -> tuple[Any, str, str]:
        txn_id = broker.begin() if txn else b""
        replies = append_payloads(broker.channel, segment, "intruder", [[b"garbage"]],
                                  txn_id=txn_id)
        assert len(replies) == 2  # the SetupAppend and the block: both refused
        for reply in replies:
            assert reply.WhichOneof("reply") == "append_failed", reply
        failed = replies[0].append_failed
        assert replies[1].append_failed.code == failed.code
        return _CODES[failed.code], failed.message, failed.error

    return [
        ("Produce", lambda: _refusal(broker.produce.Produce, append_pb2.ProduceRequest(
            topic=topic, events=[append_pb2.ProduceEvent(payload=b"garbage")]))),
        ("Append", lambda: append(False)),
        ("a transactional Append", lambda: append(True)),
        ("UpdateTopicConfig", lambda: _refusal(
            broker.admin.UpdateTopicConfig, admin_pb2.UpdateTopicConfigRequest(
                name=topic, config=admin_pb2.TopicConfig(max_event_bytes=1)))),
        ("TruncateSegment", lambda: _refusal(
            broker.admin.TruncateSegment,
            admin_pb2.TruncateSegmentRequest(segment=segment, offset=1))),
        ("DeleteTopic", lambda: _refusal(
            broker.admin.DeleteTopic, admin_pb2.DeleteTopicRequest(name=topic))),
        ("ScaleTopic", lambda: _refusal(broker.admin.ScaleTopic, admin_pb2.ScaleTopicRequest(
            topic=topic, seal=[segment], new_ranges=[admin_pb2.KeyRange(low=0.0, high=0.5),
                                                     admin_pb2.KeyRange(low=0.5, high=1.0)]))),
        ("SealTopic", lambda: _refusal(
            broker.admin.SealTopic, admin_pb2.SealTopicRequest(name=topic))),
        ("CreateTopic", lambda: _refusal(
            broker.admin.CreateTopic, admin_pb2.CreateTopicRequest(name=topic))),
    ]


@pytest.mark.parametrize("topic", SYSTEM_TOPICS)
def test_every_public_write_is_refused_and_the_broker_restarts(broker: Broker,
                                                               topic: str) -> None:
    before = broker.admin.GetTopic(admin_pb2.GetTopicRequest(name=topic), timeout=30)
    end_before = before.segments[0].end_offset
    for sequence, (action, attempt) in enumerate(_attempts(broker, topic), start=1):
        code, message, name = attempt()
        assert (code, name) == (_Code.PERMISSION_DENIED, "InternalTopicError"), action
        assert message == (
            f"topic '{topic}' is internal to the broker: {action} is refused (system topics, "
            "named '__folio_...' or _txnlog, _txncommitkeys, _txnbuffer_snapshots, "
            "_kafka_offsets, _kafka_txn_state, hold the broker's own state and only the "
            "broker writes them; they can still be read and listed with "
            "`folio topic list --internal`)")
        broker.restart()
        # The broker started, its state is whole: transactions begin, and the
        # idempotent commit made before every attempt is still a duplicate.
        assert broker.commit_once(0) is True, action
        assert broker.commit_once(sequence) is False, action
        after = broker.admin.GetTopic(admin_pb2.GetTopicRequest(name=topic), timeout=30)
        assert after.config == before.config, action
        assert [s.name for s in after.segments] == [f"{topic}/0"], action
        assert after.segments[0].start_offset == 0, action
    # Nothing the attempts sent reached the topic (the broker's own writes did).
    assert all(b"garbage" not in data for data in _raw_blocks(broker, f"{topic}/0"))
    assert end_before <= after.segments[0].end_offset


def test_system_topics_stay_readable_and_listable(broker: Broker) -> None:
    listed = broker.admin.ListTopics(admin_pb2.ListTopicsRequest(), timeout=30)
    assert [t.name for t in listed.topics] == ["user"]
    listed = broker.admin.ListTopics(admin_pb2.ListTopicsRequest(include_internal=True),
                                     timeout=30)
    assert [t.name for t in listed.topics] == sorted([*SYSTEM_TOPICS, "user"])
    for topic in SYSTEM_TOPICS:
        segments = broker.admin.GetSegments(admin_pb2.GetSegmentsRequest(topic=topic),
                                            timeout=30)
        assert [s.name for s in segments.segments] == [f"{topic}/0"]
        info = broker.admin.GetSegmentInfo(
            admin_pb2.GetSegmentInfoRequest(segment=f"{topic}/0"), timeout=30)
        assert info.segment.name == f"{topic}/0" and not info.sealed
        if topic != SNAPSHOT_TOPIC:  # snapshots come later, by their policy
            assert info.segment.end_offset > 0  # the commit wrote records
            assert _raw_blocks(broker, f"{topic}/0") != []  # Read works on it


def _raw_blocks(broker: Broker, segment: str) -> list[bytes]:
    """The bytes of the blocks of ``segment`` readable now (system records are no event blocks)."""
    stub = read_pb2_grpc.ReadStub(broker.channel)
    call: Any = stub.Read(read_pb2.ReadRequest(segment=segment, max_wait_ms=200), timeout=30)
    out: list[bytes] = []
    try:
        for response in call:
            out.extend(bytes(block.data) for block in response.blocks)
            if not response.blocks or response.end_of_segment:
                break
    finally:
        call.cancel()
    return out


def _folio(broker: Broker, *args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    assert broker.process is not None
    return subprocess.run(folio_argv(*args, "--endpoint", broker.process.address), input=stdin,
                          capture_output=True, env=folio_env(), timeout=120, check=False)


def test_cli_produce_to_a_system_topic_prints_one_error_line(broker: Broker) -> None:
    result = _folio(broker, "produce", TXN_LOG_TOPIC, stdin=b"garbage\n")
    assert result.returncode == 1
    lines = result.stderr.decode().strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"folio produce: error: topic '{TXN_LOG_TOPIC}' is internal "
                               "to the broker: Append is refused"), lines
    result = _folio(broker, "topic", "delete", COMMIT_KEYS_TOPIC)
    assert result.returncode == 1
    assert result.stderr.decode().startswith(
        f"folio topic delete: error: topic '{COMMIT_KEYS_TOPIC}' is internal to the broker")
    listed = _folio(broker, "topic", "list")
    assert listed.returncode == 0 and listed.stdout.decode().split() == ["user", "1"]
    listed = _folio(broker, "topic", "list", "--internal")
    assert listed.returncode == 0, listed.stderr
    names = [line.split("\t")[0] for line in listed.stdout.decode().splitlines()]
    assert names == sorted([*SYSTEM_TOPICS, "user"])
    broker.restart()
    assert broker.commit_once(0) is True


async def _corrupt(data_dir: Path) -> None:
    """Append undecodable records to every system topic with the broker's own components."""
    store = RocksDBMetadataStore(data_dir / "metadata")
    bookie = Bookie(BookieConfig(data_dir=str(data_dir / "bookie"),
                                 max_entry_bytes=MAX_ENTRY_BYTES))
    ledgers = LedgerClient(store, BookieDirectory([bookie]), LedgerConfig(
        max_entry_bytes=MAX_ENTRY_BYTES,
        max_add_request_bytes=max(MAX_ENTRY_BYTES, LedgerConfig.max_add_request_bytes)))
    topics = TopicManager(ledgers, store, txn_store_factory=snapshot_store)
    limit = max_value_bytes(topics.max_entry_bytes)
    try:
        for topic, records in (
            # A block that is no record at all (format byte 8: an event block), then
            # records whose header is fine but whose value is not what its reader expects.
            (TXN_LOG_TOPIC, [b"\x08\x01garbage", encode_record("ab" * 16, b"{not json", limit),
                             encode_record("commit-" + "cd" * 16, b'{"v": 1}', limit)]),
            (COMMIT_KEYS_TOPIC, [b"\x08\x01garbage",
                                 encode_record("broken-key", b"\xff\xfe", limit)]),
            (SNAPSHOT_TOPIC, [b"\x08\x01garbage",
                              encode_record("user/0-end", b"FTBS truncated", limit)]),
        ):
            segment = await topics.segment(f"{topic}/0")
            await segment.append([Block(data, 1) for data in records], "", -1)
            # What a public UpdateTopicConfig did before it was refused: with it no
            # record fits, and retention would delete the broker's state.
            await topics.update_topic_config(topic, {"max_event_bytes": 1, "retention_ms": 1000},
                                             internal=True)
    finally:
        await topics.close()
        await ledgers.close()
        bookie.shutdown()
        await store.close()


def test_undecodable_system_records_are_logged_and_skipped(broker: Broker) -> None:
    broker.stop()
    asyncio.run(_corrupt(broker.data_dir))
    broker.start()
    log = broker.log()
    assert f"system topic {TXN_LOG_TOPIC}: skipped the block at offset" in log
    assert f"of segment {TXN_LOG_TOPIC}/0 (9 bytes, starting 0801" in log
    assert f"system topic {COMMIT_KEYS_TOPIC}: skipped the block at offset" in log
    assert f"transaction log {TXN_LOG_TOPIC}/0: skipped the unreadable record of key " \
           f"'{'ab' * 16}' at offset" in log
    assert f"skipped the unreadable record of key 'commit-{'cd' * 16}'" in log
    assert "commit keys: the record of commit key 'broken-key' at offset" in log
    for topic in (TXN_LOG_TOPIC, COMMIT_KEYS_TOPIC):
        assert f"system topic {topic}: its configuration was changed " \
               "({'retention_ms': 1000, 'max_event_bytes': 1}); putting back" in log
    # Transactions work; the commit key made before still de-duplicates.
    assert broker.commit_once(0) is True
    assert broker.commit_once(1) is False
    # The snapshot topic is read when a segment loads (the commits above).
    log = broker.log()
    assert f"system topic {SNAPSHOT_TOPIC}: skipped the block at offset" in log
    assert f"system topic {SNAPSHOT_TOPIC}: its configuration was changed" in log
    for topic in SYSTEM_TOPICS:
        config = broker.admin.GetTopic(admin_pb2.GetTopicRequest(name=topic), timeout=30).config
        assert (config.max_event_bytes, config.retention_ms) == (4 * 1024 * 1024, -1)
    assert "segment user/0: transaction buffer snapshot record 'user/0-end' is unreadable" \
        in log
    # The quarantined commit key is refused (not guessed), with its position.
    txn_id = broker.begin()
    code, message, name = _refusal(broker.txns.CommitTxn, transactions_pb2.CommitTxnRequest(
        txn_ids=[txn_id], commit_key="broken-key", commit_sequence=0))
    assert (code, name) == (_Code.DATA_LOSS, "CorruptDataError")
    assert "commit key 'broken-key'" in message and "unreadable" in message
    assert f"of segment {COMMIT_KEYS_TOPIC}/0" in message
    # The committed events are there once each, read_committed.
    events = read_available(broker.channel, "user/0")
    assert events == [b"batch-0", b"batch-1"]
    # And again after one more restart (the skipped records are still there).
    broker.restart()
    assert broker.commit_once(1) is True
