"""HeldBudget: the bounds on blocks held for transactions (size, count, numbering, time, memory)."""

from __future__ import annotations

import pytest

from broker.api import Block
from broker.appends.held import (
    HELD_BLOCK_OVERHEAD,
    MAX_TXN_BLOCKS,
    MAX_TXN_BYTES,
    HeldBudget,
    HeldRun,
)
from broker.errors import (
    InvalidEventNumberError,
    TransactionBufferFullError,
    TransactionExpiredError,
    TransactionTooLargeError,
)
from tests.unit.broker.conftest import FakeClock

MIB = 1024 * 1024


def _budget(clock: FakeClock, max_bytes: int = 256 * MIB) -> HeldBudget:
    return HeldBudget(max_bytes, max_held_ms=120_000, clock=clock)


def test_hold_and_take() -> None:
    budget = _budget(FakeClock())
    run = HeldRun()
    budget.admit(run, Block(b"ab", 2), 1, end=False)
    budget.admit(run, Block(b"c", 1), 2, end=False)
    assert budget.used == 3 + 2 * HELD_BLOCK_OVERHEAD and budget.runs == 1
    budget.admit(run, Block(b"d", 1), 3, end=True)  # checked, not held
    assert [b.data for b in budget.take(run)] == [b"ab", b"c"]
    assert (budget.used, budget.runs, run.blocks) == (0, 0, [])


def test_a_transaction_holds_at_most_16_mib_end_block_included() -> None:
    budget = _budget(FakeClock())
    run = HeldRun()
    for number in range(4):
        budget.admit(run, Block(bytes(4 * MIB), 1), number, end=False)
    with pytest.raises(TransactionTooLargeError, match=r"16777216 bytes \(16 MiB\)") as raised:
        budget.admit(run, Block(b"x", 1), 4, end=True)
    assert (raised.value.size, raised.value.limit) == (MAX_TXN_BYTES + 1, MAX_TXN_BYTES)
    budget.drop(run)
    assert budget.used == 0


def test_a_transaction_holds_at_most_max_blocks() -> None:
    budget = _budget(FakeClock())
    run = HeldRun()
    for _ in range(MAX_TXN_BLOCKS):
        budget.admit(run, Block(b"x", 1), -1, end=False)
    with pytest.raises(TransactionTooLargeError, match="blocks"):
        budget.admit(run, Block(b"x", 1), -1, end=True)


def test_held_blocks_must_follow_each_other() -> None:
    budget = _budget(FakeClock())
    run = HeldRun()
    budget.admit(run, Block(b"a", 2), 5, end=False)  # 4..5
    with pytest.raises(InvalidEventNumberError) as raised:
        budget.admit(run, Block(b"b", 2), 6, end=False)  # 5..6: goes back
    assert raised.value.expected_above == 5
    with pytest.raises(InvalidEventNumberError):
        budget.admit(run, Block(b"b", 1), 7, end=True)  # 7: skips 6
    with pytest.raises(InvalidEventNumberError):
        budget.admit(run, Block(b"b", 1), -1, end=True)  # numbered, then not
    budget.admit(run, Block(b"b", 3), 8, end=True)  # 6..8
    unnumbered = HeldRun()
    budget.admit(unnumbered, Block(b"a", 2), -1, end=False)
    budget.admit(unnumbered, Block(b"a", 2), -1, end=True)


def test_the_budget_is_broker_wide_and_retriable() -> None:
    budget = _budget(FakeClock(), max_bytes=3 * MIB)
    first, second = HeldRun(), HeldRun()
    budget.admit(first, Block(bytes(MIB), 1), -1, end=False)
    budget.admit(second, Block(bytes(MIB), 1), -1, end=False)
    with pytest.raises(TransactionBufferFullError) as raised:
        budget.admit(second, Block(bytes(MIB), 1), -1, end=False)
    assert raised.value.retriable and raised.value.limit == 3 * MIB
    budget.drop(second)
    budget.admit(first, Block(bytes(MIB), 1), -1, end=False)
    assert budget.used == 2 * (MIB + HELD_BLOCK_OVERHEAD)


def test_old_runs_expire_and_make_room() -> None:
    clock = FakeClock()
    budget = _budget(clock, max_bytes=2 * MIB)
    old, new = HeldRun(), HeldRun()
    budget.admit(old, Block(bytes(MIB), 1), -1, end=False)
    clock.advance_ms(100_000)
    budget.admit(new, Block(b"x", 1), -1, end=False)
    clock.advance_ms(20_001)  # old: held 120.001 s
    budget.admit(new, Block(bytes(MIB), 1), -1, end=False)  # room made by dropping `old`
    assert old.blocks == [] and old.expired
    with pytest.raises(TransactionExpiredError, match="transaction expired") as raised:
        budget.admit(old, Block(b"y", 1), -1, end=True)
    assert raised.value.held_ms == 120_001
    budget.drop(old)
    budget.admit(old, Block(b"z", 1), -1, end=False)  # a fresh start
    clock.advance_ms(120_001 - 20_001)
    with pytest.raises(TransactionExpiredError):  # `new` is too old now, at its next block
        budget.admit(new, Block(b"x", 1), -1, end=True)
