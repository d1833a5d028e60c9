"""The transaction buffer's snapshots on the real store: ``_txnbuffer_snapshots`` on RocksDB.

The PIP-178 seed's three scenarios (normal flow; a snapshot written
incompletely; the same after retention dropped aborts), compaction of the
snapshot topic racing a snapshot write, and snapshots of many records, all
against ``TopicSnapshotStore`` over a ``CompactedTopic`` on a real in-process
bookie and RocksDB metadata, restarted (``BrokerEnv.restart``) or crashed
(``BrokerEnv.abandon``) on the same directories. The segment's own entries live
in an in-memory ``MemorySegmentLog`` (the log is not what is under test): it
survives the restarts, as the segment's ledgers would.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping

import pytest

from broker.system.compacted_topic import CompactedTopic
from broker.system.snapshot_store import SNAPSHOT_TOPIC, TopicSnapshotStore
from tests.unit.broker.conftest import BrokerEnv
from tests.unit.txnbuffer.conftest import MemorySegmentLog
from txnbuffer import EntryKind, LoggedEntry, Position, TransactionBuffer, TxnId
from txnbuffer.snapshot import HEADER, ITEM_BYTES, chunk_capacity, decode_record

SEGMENT = "orders-0"
#: Two aborts per record: 5 aborts make chunks -1, -2 and -end; 7 make -1..-3 and -end.
TWO_PER_CHUNK = HEADER.size + 2 * ITEM_BYTES
#: Compaction copies about one snapshot record per entry: many steps to race.
BATCH_BYTES = 300
FULL_REPLAY = "replaying the whole segment"
#: The transactions left open (above every aborted one's number).
OPEN = 10**9

WriteHook = Callable[[int, str], Awaitable[None]]


class InjectedCrash(Exception):
    """Stands for the broker dying at this point."""


class HookedStore:
    """``TopicSnapshotStore`` with a hook awaited before each write (its number from 0)."""

    def __init__(self, inner: TopicSnapshotStore) -> None:
        self.inner = inner
        self.before_write: WriteHook | None = None
        self.attempted = 0
        self.completed = 0
        self.progress = asyncio.Event()

    @property
    def max_record_bytes(self) -> int:
        return self.inner.max_record_bytes

    async def write(self, key: str, value: bytes | None) -> None:
        number = self.attempted
        self.attempted += 1
        if self.before_write is not None:
            await self.before_write(number, key)
        await self.inner.write(key, value)
        self.completed += 1
        self.progress.set()

    async def read_prefix(self, prefix: str) -> Mapping[str, bytes]:
        return await self.inner.read_prefix(prefix)

    async def wait_completed(self, count: int) -> None:
        while self.completed < count:
            self.progress.clear()
            await self.progress.wait()

    def crash_before(self, number: int) -> None:
        """Let writes ``0 .. number-1`` through, fail the rest (the broker is dead)."""
        async def hook(index: int, key: str) -> None:
            if index >= number:
                raise InjectedCrash(f"before write {index} ({key})")
        self.attempted = 0
        self.before_write = hook


class Broker:
    """One broker's snapshot topic and the buffer of one segment, on ``env``'s directories."""

    def __init__(self, env: BrokerEnv, chunk_bytes: int | None = TWO_PER_CHUNK) -> None:
        self.env = env
        self.chunk_bytes = chunk_bytes
        self.log = MemorySegmentLog()
        self._open()

    def _open(self) -> None:
        self.manager = self.env.manager()
        self.topic = CompactedTopic(self.manager, SNAPSHOT_TOPIC, maintain=False,
                                    batch_bytes=BATCH_BYTES)
        self.store = HookedStore(TopicSnapshotStore(self.topic))
        self.buffer = self.new_buffer()

    def new_buffer(self) -> TransactionBuffer:
        return TransactionBuffer(SEGMENT, self.store, chunk_bytes=self.chunk_bytes)

    async def start(self) -> TransactionBuffer:
        await self.buffer.recover(self.log)
        return self.buffer

    async def restart(self, *, crashed: bool = False, compact_first: bool = False,
                      ) -> TransactionBuffer:
        """Restart the stack on the same directories (after a crash: nothing closed)."""
        if crashed:
            self.env.abandon(self.manager)
        await self.env.restart()
        self._open()
        if compact_first:
            await self.topic.compact()
        return await self.start()

    async def recovered_copy(self) -> TransactionBuffer:
        """A second buffer recovered from the topic as it is now (a reader's view)."""
        other = self.new_buffer()
        await other.recover(self.log)
        return other

    def _report(self, kind: EntryKind, txn_id: TxnId | None = None) -> Position:
        entry: LoggedEntry = self.log.append(kind, txn_id)
        self.buffer.on_entry(entry)
        return entry.position

    def data(self) -> Position:
        return self._report(EntryKind.DATA)

    def txn(self, txn: int) -> Position:
        return self._report(EntryKind.TXN_DATA, (0, txn))

    def commit(self, txn: int) -> Position:
        return self._report(EntryKind.COMMIT_MARKER, (0, txn))

    def abort(self, txn: int) -> Position:
        return self._report(EntryKind.ABORT_MARKER, (0, txn))

    def aborted(self, *txns: int) -> None:
        for txn in txns:
            self.txn(txn)
            self.abort(txn)

    def delete_ledgers_through(self, ledger_id: int) -> None:
        self.log.delete_through(ledger_id)
        self.buffer.on_ledger_deleted(ledger_id)

    def visible(self, buffer: TransactionBuffer | None = None) -> list[Position]:
        buffer = buffer or self.buffer
        return [e.position for e in self.log.entries if buffer.visible(e.position, e.kind,
                                                                        e.txn_id)]

    async def records(self) -> dict[str, int]:
        """Snapshot id of every live record of the segment, by key."""
        values = await self.topic.read_prefix(f"{SEGMENT}-")
        return {key: decode_record(key, value).snapshot_id for key, value in values.items()}


State = tuple[set[TxnId], Position, set[TxnId]]


def state(buffer: TransactionBuffer) -> State:
    """Aborted txns, max_read_position, and which of txns ``OPEN`` and ``OPEN + 1`` are open."""
    return ({txn for _, txn in buffer.aborted_txns()}, buffer.max_read_position,
            {txn for txn in ((0, OPEN), (0, OPEN + 1)) if buffer.is_ongoing(txn)})


def txns(*numbers: int) -> set[TxnId]:
    return {(0, number) for number in numbers}


def before(position: Position) -> Position:
    return Position(position.ledger_id, position.entry_id - 1)


# ---------------------------------------------------------------- scenario 1: normal flow


async def test_normal_flow_survives_a_restart(env: BrokerEnv) -> None:
    node = Broker(env)
    await node.start()
    node.aborted(*range(1, 8))
    first_open = node.txn(OPEN)  # open across the snapshot
    node.data()
    await node.buffer.take_snapshot()
    assert await node.records() == {f"{SEGMENT}-{i}": 1 for i in (1, 2, 3)} | {
        f"{SEGMENT}-end": 1}
    assert state(node.buffer) == (txns(*range(1, 8)), before(first_open), txns(OPEN))
    node.aborted(8)
    node.commit(OPEN)
    second_open = node.txn(OPEN + 1)
    expected = (txns(*range(1, 9)), before(second_open), txns(OPEN + 1))
    assert state(node.buffer) == expected
    visible = node.visible()

    buffer = await node.restart()
    assert state(buffer) == expected
    assert node.visible() == visible
    # And again with the snapshot taken after the restart, compacted, restarted.
    await buffer.take_snapshot()
    await node.topic.compact()
    buffer = await node.restart()
    assert state(buffer) == expected
    assert node.visible() == visible


# ---------------------------------------------------- scenario 2: written incompletely


@pytest.mark.parametrize("written", [1, 2, 3])
async def test_snapshot_written_incompletely(env: BrokerEnv, written: int,
                                             caplog: pytest.LogCaptureFixture) -> None:
    node = Broker(env)
    await node.start()
    node.aborted(*range(1, 6))
    await node.buffer.take_snapshot()  # -1 (1,2) -2 (3,4) -end (5), snapshot 1
    node.aborted(6, 7)
    first_open = node.txn(OPEN)
    node.data()
    expected = (txns(*range(1, 8)), before(first_open), txns(OPEN))
    assert state(node.buffer) == expected
    visible = node.visible()
    node.store.crash_before(written)  # of -1 (1,2) -2 (3,4) -3 (5,6) -end (7): `written` land
    with pytest.raises(InjectedCrash):
        await node.buffer.take_snapshot()

    with caplog.at_level(logging.WARNING):
        buffer = await node.restart(crashed=True)
    assert FULL_REPLAY not in caplog.text
    records = await node.records()
    assert records[f"{SEGMENT}-end"] == 1
    assert [records[f"{SEGMENT}-{i}"] for i in range(1, written + 1)] == [2] * written
    assert state(buffer) == expected
    assert node.visible() == visible

    # A snapshot after the recovery completes, and it too survives compaction and restart.
    await buffer.take_snapshot()
    assert set((await node.records()).values()) == {3}
    await node.topic.compact()
    buffer = await node.restart()
    assert state(buffer) == expected
    assert node.visible() == visible


# --------------------------------------- scenario 3: the same after retention dropped aborts


@pytest.mark.parametrize("written", [1, 2, 3])
async def test_snapshot_written_incompletely_after_retention(
        env: BrokerEnv, written: int, caplog: pytest.LogCaptureFixture) -> None:
    node = Broker(env)
    await node.start()
    node.aborted(1, 2)
    node.log.roll()
    node.aborted(*range(3, 8))
    await node.buffer.take_snapshot()  # -1 (1,2) -2 (3,4) -3 (5,6) -end (7)
    node.delete_ledgers_through(0)
    assert not node.buffer.is_aborted((0, 1))
    node.aborted(8, 9)
    first_open = node.txn(OPEN)
    expected = (txns(*range(3, 10)), before(first_open), txns(OPEN))
    assert state(node.buffer) == expected
    visible = node.visible()
    node.store.crash_before(written)  # of -1 (3,4) -2 (5,6) -3 (7,8) -end (9)
    with pytest.raises(InjectedCrash):
        await node.buffer.take_snapshot()

    with caplog.at_level(logging.WARNING):
        buffer = await node.restart(crashed=True)
    assert FULL_REPLAY not in caplog.text
    assert state(buffer) == expected
    assert node.visible() == visible
    await buffer.take_snapshot()
    await node.topic.compact()
    buffer = await node.restart()
    assert state(buffer) == expected


async def test_leftover_chunks_after_retention_are_ignored_then_deleted(env: BrokerEnv) -> None:
    node = Broker(env)
    await node.start()
    node.aborted(*range(1, 6))
    node.log.roll()
    node.aborted(6, 7)
    await node.buffer.take_snapshot()  # -1..-3 and -end
    node.delete_ledgers_through(0)  # 1..5 gone: the next snapshot is -end alone
    node.store.crash_before(1)  # -end written, the tombstones of -1..-3 not
    with pytest.raises(InjectedCrash):
        await node.buffer.take_snapshot()
    buffer = await node.restart(crashed=True, compact_first=True)
    assert await node.records() == {f"{SEGMENT}-{i}": 1 for i in (1, 2, 3)} | {
        f"{SEGMENT}-end": 2}
    expected = (txns(6, 7), node.log.entries[-1].position, set[TxnId]())
    assert state(buffer) == expected
    await buffer.take_snapshot()
    assert await node.records() == {f"{SEGMENT}-end": 3}
    await node.topic.compact()
    buffer = await node.restart()
    assert await node.records() == {f"{SEGMENT}-end": 3}
    assert state(buffer) == expected


# ---------------------------------------------- compaction racing a snapshot write


async def _eleven_aborts_and_a_snapshot(node: Broker) -> State:
    """Snapshot 1 of 7 aborts on the topic; 4 more and an open txn in the buffer only."""
    await node.start()
    node.aborted(*range(1, 8))
    await node.buffer.take_snapshot()
    node.aborted(*range(8, 12))
    first_open = node.txn(OPEN)
    node.data()
    expected = (txns(*range(1, 12)), before(first_open), txns(OPEN))
    assert state(node.buffer) == expected
    return expected


async def test_compaction_concurrent_with_a_snapshot(env: BrokerEnv) -> None:
    node = Broker(env)
    expected = await _eleven_aborts_and_a_snapshot(node)
    result, _ = await asyncio.gather(node.topic.compact(), node.buffer.take_snapshot())
    assert result.copied > 0
    assert state(await node.recovered_copy()) == expected
    buffer = await node.restart()
    assert state(buffer) == expected
    assert set((await node.records()).values()) == {2}


@pytest.mark.parametrize("first_step", [0, 2, 5])
@pytest.mark.parametrize("crash_at_step", [None, 0, 1, 3, 5])
async def test_snapshot_writes_between_compaction_steps(
        env: BrokerEnv, first_step: int, crash_at_step: int | None) -> None:
    """One snapshot write lands at each compaction step from ``first_step`` on.

    -1..-5 and -end: six writes, racing the roll-over (they land after the
    compaction point), the copies of their own keys' older records, the
    truncation. At every step a reader recovering from the topic must get the
    full state; with ``crash_at_step`` the broker dies there instead, mid-write
    and mid-compaction, and recovers after a restart.
    """
    node = Broker(env)
    expected = await _eleven_aborts_and_a_snapshot(node)
    permits = asyncio.Semaphore(0)
    writes = 6

    async def gate(index: int, key: str) -> None:
        await permits.acquire()

    node.store.attempted = 0
    node.store.completed = 0
    node.store.before_write = gate
    writing = asyncio.create_task(node.buffer.take_snapshot())
    released = 0
    steps: list[str] = []

    async def step(name: str) -> None:
        nonlocal released
        steps.append(name)
        if len(steps) - 1 == crash_at_step:
            raise InjectedCrash(name)
        assert state(await node.recovered_copy()) == expected, steps
        if len(steps) - 1 >= first_step and released < writes:
            released += 1
            permits.release()
            await node.store.wait_completed(released)
            assert state(await node.recovered_copy()) == expected, steps

    if crash_at_step is not None:
        with pytest.raises(InjectedCrash):
            await node.topic.compact(hook=step)
        writing.cancel()
        with pytest.raises(asyncio.CancelledError):
            await writing
        buffer = await node.restart(crashed=True)
        assert state(buffer) == expected
        await buffer.take_snapshot()
        await node.topic.compact()
        buffer = await node.restart()
        assert state(buffer) == expected
        return

    await node.topic.compact(hook=step)
    assert steps == ["rolled", *["copied-batch"] * 3, "copied", "truncated"]
    for _ in range(writes - released):
        permits.release()
    await writing
    assert set((await node.records()).values()) == {2}
    assert state(await node.recovered_copy()) == expected
    await node.topic.compact()
    buffer = await node.restart()
    assert state(buffer) == expected


@pytest.mark.parametrize("written", [1, 2, 3])
async def test_compaction_between_the_writes_of_an_interrupted_snapshot(
        env: BrokerEnv, written: int, caplog: pytest.LogCaptureFixture) -> None:
    node = Broker(env)
    await node.start()
    node.aborted(1, 2)
    node.log.roll()
    node.aborted(*range(3, 8))
    await node.buffer.take_snapshot()  # -1 (1,2) -2 (3,4) -3 (5,6) -end (7)
    node.delete_ledgers_through(0)
    node.aborted(8, 9)
    first_open = node.txn(OPEN)
    expected = (txns(*range(3, 10)), before(first_open), txns(OPEN))
    compactions = 0

    async def compact_then_crash(index: int, key: str) -> None:
        nonlocal compactions
        await node.topic.compact()  # before every write, the first one included
        compactions += 1
        # Before the new -1 lands, snapshot 1 is whole and still names aborts 1 and 2,
        # whose ledger is gone: harmless (no entry of theirs is left), documented.
        want = (expected[0] | txns(1, 2), *expected[1:]) if index == 0 else expected
        assert state(await node.recovered_copy()) == want, key
        if index >= written:
            raise InjectedCrash(key)

    node.store.attempted = 0
    node.store.before_write = compact_then_crash
    with pytest.raises(InjectedCrash):
        await node.buffer.take_snapshot()
    assert compactions == written + 1
    with caplog.at_level(logging.WARNING):
        buffer = await node.restart(crashed=True, compact_first=True)
    assert FULL_REPLAY not in caplog.text
    assert state(buffer) == expected


# ------------------------------------------------------- snapshots of many records


async def test_snapshot_of_many_records_round_trips(env: BrokerEnv) -> None:
    node = Broker(env, chunk_bytes=HEADER.size + 3 * ITEM_BYTES)
    await node.start()
    node.aborted(*range(500))
    node.log.roll()
    node.aborted(*range(500, 1000))
    first_open = node.txn(OPEN)
    await node.buffer.take_snapshot()
    assert len(await node.records()) == 334  # 333 chunks of 3 and -end
    limit = node.buffer.max_read_position
    assert limit == before(first_open)
    # What the snapshot covers leaves the log: the snapshot alone must carry the aborts.
    node.log.entries = [entry for entry in node.log.entries if entry.position > limit]
    expected = (txns(*range(1000)), limit, txns(OPEN))
    buffer = await node.restart()
    assert state(buffer) == expected
    await node.topic.compact()
    buffer = await node.restart()
    assert state(buffer) == expected

    # Retention halves the list: the next snapshot is shorter and deletes the rest.
    node.delete_ledgers_through(0)
    await buffer.take_snapshot()
    assert len(await node.records()) == 167  # 166 chunks of 3 and -end
    await node.topic.compact()
    assert (await node.topic.stats()).live_keys == 167
    buffer = await node.restart()
    assert state(buffer) == (txns(*range(500, 1000)), limit, txns(OPEN))


async def test_snapshot_larger_than_the_topics_record_limit(env: BrokerEnv) -> None:
    node = Broker(env, chunk_bytes=None)  # records as large as the topic takes
    await node.start()
    capacity = chunk_capacity(node.store.max_record_bytes)
    count = capacity + 10
    node.aborted(*range(count))
    first_open = node.txn(OPEN)
    await node.buffer.take_snapshot()
    assert await node.records() == {f"{SEGMENT}-1": 1, f"{SEGMENT}-end": 1}
    limit = before(first_open)
    node.log.entries = [entry for entry in node.log.entries if entry.position > limit]
    await node.topic.compact()
    buffer = await node.restart()
    assert buffer.aborted_count == count
    assert state(buffer) == (txns(*range(count)), limit, txns(OPEN))
