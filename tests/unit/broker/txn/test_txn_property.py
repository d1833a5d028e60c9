"""Random begin/write/commit/abort/timeout/restart runs through the coordinator and segments.

A model computes, from first principles, what ``read_committed`` must return
for each segment: in segment order, the plain entries and the entries of
committed transactions, up to (not including) the first entry of the earliest
transaction still open. The run drives the real ``TxnCoordinator`` on real
segments (RocksDB, an in-process bookie), with crashes (the broker abandoned
without closing) and clean restarts, and compares after every step.
"""

from __future__ import annotations

import asyncio
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.api import Block, TopicConfig
from broker.errors import TxnStateError
from broker.topics.manager import TopicManager
from broker.txn.coordinator import TxnCoordinator, TxnState
from tests.unit.broker.conftest import BrokerEnv, read_all
from txnbuffer.api import TxnId

SLOTS = 3
MAX_OPEN = 3
SEGMENTS = ("t/0", "t/1")
TIMEOUT_MS = 10_000

OPS = st.one_of(
    st.tuples(st.just("begin"), st.integers(0, SLOTS - 1), st.just(0)),
    st.tuples(st.just("write"), st.integers(0, SLOTS - 1), st.integers(0, 1)),
    st.tuples(st.just("commit"), st.integers(0, SLOTS - 1), st.just(0)),
    st.tuples(st.just("commit_two"), st.integers(0, SLOTS - 1), st.just(0)),
    st.tuples(st.just("abort"), st.integers(0, SLOTS - 1), st.just(0)),
    st.tuples(st.just("plain"), st.just(0), st.integers(0, 1)),
    st.tuples(st.just("timeout"), st.integers(0, SLOTS - 1), st.just(0)),
    st.tuples(st.just("restart"), st.just(0), st.sampled_from(["crash", "clean"])),
)


@dataclass
class Model:
    """Entries per segment as (data, txn slot generation or None), and each txn's fate."""

    entries: dict[str, list[tuple[bytes, TxnId | None]]] = field(
        default_factory=lambda: {name: [] for name in SEGMENTS})
    fate: dict[TxnId, str] = field(default_factory=dict)  # open / committed / aborted
    deadline_ms: dict[TxnId, int] = field(default_factory=dict)

    def visible(self, segment: str) -> list[bytes]:
        shown: list[bytes] = []
        for data, txn in self.entries[segment]:
            if txn is None:
                shown.append(data)
                continue
            fate = self.fate[txn]
            if fate == "open":
                break  # max_read_position: just before the earliest open txn's first entry
            if fate == "committed":
                shown.append(data)
        return shown

    def time_out(self, now_ms: int) -> None:
        for txn, fate in self.fate.items():
            if fate == "open" and self.deadline_ms[txn] <= now_ms:
                self.fate[txn] = "aborted"


class Run:
    """The broker under test and the model, stepped together."""

    def __init__(self, env: BrokerEnv) -> None:
        self.env = env
        self.model = Model()
        self.counter = 0
        self.topics: TopicManager
        self.coordinator: TxnCoordinator

    async def start(self) -> None:
        self.topics = self.env.manager()
        self.coordinator = TxnCoordinator(self.topics, clock=self.env.clock)
        await self.coordinator.start()

    def now_ms(self) -> int:
        return int(self.env.clock() * 1000)

    def pick(self, index: int) -> TxnId | None:
        """The ``index``-th open transaction (modulo), None when none is open."""
        open_txns = [txn for txn, fate in self.model.fate.items() if fate == "open"]
        return open_txns[index % len(open_txns)] if open_txns else None

    async def step(self, op: str, a: int, b: int | str) -> None:
        model = self.model
        txn = self.pick(a)
        if op == "begin" or (txn is None and op in ("write", "commit", "commit_two", "abort",
                                                      "timeout")):
            if len(self.open()) < MAX_OPEN:
                txn = await self.coordinator.begin(TIMEOUT_MS)
                model.fate[txn] = "open"
                model.deadline_ms[txn] = self.now_ms() + TIMEOUT_MS
        elif op == "write" and txn is not None:
            await self.write(txn, SEGMENTS[int(b)])
        elif op == "plain":
            data = self.next_data()
            segment = await self.topics.segment(SEGMENTS[int(b)])
            await segment.append([Block(data, 1)], "", -1)
            model.entries[SEGMENTS[int(b)]].append((data, None))
        elif op in ("commit", "commit_two") and txn is not None:
            txns = [txn]
            other = self.pick(a + 1) if op == "commit_two" else None
            if other is not None and other != txn:
                txns.append(other)
            await self.finish(txns, "committed")
        elif op == "abort" and txn is not None:
            await self.finish([txn], "aborted")
        elif op == "timeout" and txn is not None:
            # Past this transaction's deadline (and maybe others'): the round aborts them.
            self.env.clock.advance_ms(max(model.deadline_ms[txn] - self.now_ms(), 0) + 1)
            expired = [t for t in self.open() if model.deadline_ms[t] <= self.now_ms()]
            assert await self.coordinator.tick() == len(expired)
            model.time_out(self.now_ms())
            for gone in expired:
                assert self.coordinator.status(gone).state is TxnState.TIMED_OUT
        elif op == "restart":
            if b == "crash":
                self.env.abandon(self.topics)
            await self.coordinator.close()
            await self.env.restart()
            await self.start()
            for still in self.open():  # open transactions survive a restart
                assert self.coordinator.status(still).state is TxnState.OPEN

    def open(self) -> list[TxnId]:
        return [txn for txn, fate in self.model.fate.items() if fate == "open"]

    async def write(self, txn: TxnId, name: str) -> None:
        data = self.next_data()
        segment = await self.topics.segment(name)
        async with self.coordinator.writing(txn, name):
            await segment.append([Block(data, 1)], "", -1, txn_id=txn)
        self.model.entries[name].append((data, txn))

    async def finish(self, txns: list[TxnId], fate: str) -> None:
        if fate == "committed":
            await self.coordinator.commit(txns)
        else:
            await self.coordinator.abort(txns[0])
        for txn in txns:
            self.model.fate[txn] = fate
        for txn in txns:  # a finished transaction takes nothing more
            try:
                await self.write(txn, SEGMENTS[0])
            except TxnStateError as error:
                assert error.actual in ("COMMITTED", "ABORTED")
            else:
                raise AssertionError("a write after the end was taken")

    def next_data(self) -> bytes:
        self.counter += 1
        return f"e{self.counter}".encode()

    async def check(self) -> None:
        for name in SEGMENTS:
            segment = await self.topics.segment(name)
            shown = [b.data for b in await read_all(segment, segment.start_offset)]
            assert shown == self.model.visible(name), name


async def run(ops: list[tuple[str, int, int | str]]) -> None:
    with tempfile.TemporaryDirectory() as root:
        env = BrokerEnv(Path(root))
        try:
            broker = Run(env)
            await broker.start()
            await broker.topics.create_topic("t", 2, TopicConfig())
            for op, a, b in ops:
                await broker.step(op, a, b)
                await broker.check()
            await broker.coordinator.close()
        finally:
            await env.stop()


@settings(max_examples=60, deadline=None)
@given(st.lists(OPS, min_size=4, max_size=40))
def test_read_committed_matches_the_model(ops: list[tuple[str, int, int | str]]) -> None:
    asyncio.run(run(ops))
