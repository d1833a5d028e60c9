"""Random begin/write/commit/abort/snapshot/crash/restart/retention runs against a model."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.txnbuffer.conftest import MemorySnapshotStore, Segment, StoreCrashedError
from txnbuffer import EARLIEST, EntryKind, Position
from txnbuffer.snapshot import HEADER, ITEM_BYTES

TXNS = 6
OPS = st.one_of(
    st.tuples(st.just("write"), st.integers(0, TXNS - 1)),
    st.tuples(st.just("commit"), st.integers(0, TXNS - 1)),
    st.tuples(st.just("abort"), st.integers(0, TXNS - 1)),
    st.tuples(st.just("data"), st.just(0)),
    st.tuples(st.just("roll"), st.just(0)),
    st.tuples(st.just("delete_oldest"), st.just(0)),
    st.tuples(st.just("snapshot"), st.just(0)),
    st.tuples(st.just("crash_snapshot"), st.integers(0, 4)),
    st.tuples(st.just("restart"), st.just(0)),
    st.tuples(st.just("compact"), st.just(0)),
)


@dataclass
class Model:
    """What read_committed must return, computed from first principles."""

    fate: dict[tuple[int, int], str] = field(default_factory=dict)  # open/committed/aborted
    first: dict[tuple[int, int], Position] = field(default_factory=dict)
    generation: dict[int, int] = field(default_factory=dict)  # a finished id is never reused
    last: Position = EARLIEST

    def txn_id(self, txn: int) -> tuple[int, int]:
        return (self.generation.get(txn, 0), txn)

    def max_read_position(self) -> Position:
        open_firsts = [self.first[t] for t, fate in self.fate.items() if fate == "open"]
        if not open_firsts:
            return self.last
        earliest = min(open_firsts)
        return Position(earliest.ledger_id, earliest.entry_id - 1)


async def run(ops: list[tuple[str, int]]) -> None:
    store = MemorySnapshotStore(max_record_bytes=HEADER.size + 2 * ITEM_BYTES)
    seg = Segment(store)
    await seg.start()
    model = Model()
    for op, arg in ops:
        if op == "write":
            txn_id = model.txn_id(arg)
            if model.fate.get(txn_id, "open") != "open":  # finished: the next one
                model.generation[arg] = model.generation.get(arg, 0) + 1
                txn_id = model.txn_id(arg)
            position = seg.txn(txn_id)
            if txn_id not in model.fate:
                model.fate[txn_id] = "open"
                model.first[txn_id] = position
            model.last = position
        elif op in ("commit", "abort"):
            txn_id = model.txn_id(arg)
            if model.fate.get(txn_id) != "open":
                continue
            model.last = seg.commit(txn_id) if op == "commit" else seg.abort(txn_id)
            model.fate[txn_id] = "committed" if op == "commit" else "aborted"
        elif op == "data":
            model.last = seg.data()
        elif op == "roll":
            seg.log.roll()
        elif op == "delete_oldest":
            ledgers = sorted({e.position.ledger_id for e in seg.log.entries})
            if len(ledgers) < 2:
                continue
            oldest = ledgers[0]
            limit = model.max_read_position()
            if any(e.position > limit for e in seg.log.entries
                   if e.position.ledger_id == oldest):
                continue  # retention never deletes what readers may not have read
            seg.delete_ledgers_through(oldest)
        elif op == "snapshot":
            await seg.buffer.take_snapshot()
        elif op == "crash_snapshot":
            store.fail_after(arg)
            with contextlib.suppress(StoreCrashedError):
                await seg.buffer.take_snapshot()
            store.heal()
            await seg.restart()
        elif op == "restart":
            await seg.restart()
        elif op == "compact":
            store.compact()
        check(seg, model)
    await seg.restart()
    check(seg, model)


def check(seg: Segment, model: Model) -> None:
    limit = model.max_read_position()
    assert seg.buffer.max_read_position == limit
    expected = [
        entry.position for entry in seg.log.entries
        if entry.position <= limit and (
            entry.kind is EntryKind.DATA
            or (entry.kind is EntryKind.TXN_DATA and entry.txn_id is not None
                and model.fate[entry.txn_id] == "committed"))
    ]
    assert seg.visible_positions() == expected


@settings(max_examples=200, deadline=None)
@given(st.lists(OPS, max_size=60))
def test_buffer_matches_model(ops: list[tuple[str, int]]) -> None:
    asyncio.run(run(ops))
