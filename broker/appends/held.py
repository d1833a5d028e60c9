"""Blocks held for transactions (``AppendBlock`` with ``end = false``) and their bounds.

A flow's held blocks are a *run*: the broker writes them with the flow's next
``end`` block as ONE ledger entry, so a reader sees the whole transaction or
none of it (PDP-44). Bounds, each checked with constant work per block:

* per transaction: ``MAX_TXN_BYTES`` (16 MiB) of block bytes, the ``end``
  block included, in at most ``MAX_TXN_BLOCKS`` blocks, so that the entry
  (with an 8-byte frame header per block) fits a ledger entry of 16 MiB plus
  1 MiB of headroom (``TransactionTooLargeError``, RESOURCE_EXHAUSTED);
* numbering: each held block's numbers follow the previous block's (its
  ``last_event_number - event_count`` is the previous ``last_event_number``),
  or no block of the run is numbered (``InvalidEventNumberError``);
* broker-wide: ``HeldBudget.max_bytes`` (default 256 MiB) of held bytes over
  every stream, each block costing its bytes plus ``HELD_BLOCK_OVERHEAD``
  (``TransactionBufferFullError``, RESOURCE_EXHAUSTED, retriable);
* in time: a run whose first block is older than ``max_held_ms`` (default
  120 s) fails the next command of its flow (``TransactionExpiredError``,
  FAILED_PRECONDITION); when the budget needs room, such runs are dropped
  first.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from broker.api import Block
from broker.errors import (
    InvalidEventNumberError,
    TransactionBufferFullError,
    TransactionExpiredError,
    TransactionTooLargeError,
)

__all__ = [
    "DEFAULT_MAX_HELD_BYTES",
    "DEFAULT_MAX_HELD_MS",
    "HELD_BLOCK_OVERHEAD",
    "MAX_TXN_BLOCKS",
    "MAX_TXN_BYTES",
    "HeldBudget",
    "HeldRun",
]

MIB = 1024 * 1024
#: Bytes of blocks one transaction (held blocks and their ``end`` block) may hold.
MAX_TXN_BYTES = 16 * MIB
#: Blocks one transaction may hold (their frame headers fit the entry's headroom).
MAX_TXN_BLOCKS = 65536
#: What a held block costs the budget beyond its bytes (its Python objects).
HELD_BLOCK_OVERHEAD = 128
#: Default broker-wide limit of held bytes.
DEFAULT_MAX_HELD_BYTES = 256 * MIB
#: Default time a run may be held.
DEFAULT_MAX_HELD_MS = 120_000


class HeldRun:
    """The blocks one flow holds for its next ``end`` block."""

    __slots__ = ("blocks", "cost", "data_bytes", "expired", "last_event_number", "since_ms")

    def __init__(self) -> None:
        self.blocks: list[Block] = []
        self.data_bytes = 0
        self.cost = 0
        self.since_ms = 0
        self.last_event_number = -1
        # Dropped by the budget for its age: the flow's next command fails.
        self.expired = False


class HeldBudget:
    """The broker-wide account of held blocks; one per ``AppendServicer``.

    Args:
        max_bytes: held bytes (plus ``HELD_BLOCK_OVERHEAD`` per block) over
            every stream.
        max_held_ms: how long a run may be held, from its first block.
        clock: monotonic seconds (injectable for tests).
    """

    def __init__(self, max_bytes: int = DEFAULT_MAX_HELD_BYTES,
                 max_held_ms: int = DEFAULT_MAX_HELD_MS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if max_bytes <= 0 or max_held_ms <= 0:
            raise ValueError("max_bytes and max_held_ms must be positive")
        self.max_bytes = max_bytes
        self.max_held_ms = max_held_ms
        self._clock = clock
        self.used = 0
        # Runs holding blocks, oldest first (a dict keeps insertion order).
        self._runs: dict[HeldRun, None] = {}

    @property
    def runs(self) -> int:
        """How many runs hold blocks now."""
        return len(self._runs)

    def admit(self, run: HeldRun, block: Block, last_event_number: int, end: bool) -> None:
        """Check ``block`` against ``run`` and, unless ``end``, hold it.

        Raises (the caller then drops the run) ``TransactionExpiredError``,
        ``InvalidEventNumberError``, ``TransactionTooLargeError`` or
        ``TransactionBufferFullError``.
        """
        now_ms = int(self._clock() * 1000)
        if run.expired or (run.blocks and now_ms - run.since_ms > self.max_held_ms):
            raise TransactionExpiredError(now_ms - run.since_ms, self.max_held_ms)
        if run.blocks:
            _check_follows(run, block, last_event_number)
            size = run.data_bytes + len(block.data)
            if size > MAX_TXN_BYTES:
                raise TransactionTooLargeError(size, MAX_TXN_BYTES)
            if len(run.blocks) + 1 > MAX_TXN_BLOCKS:
                raise TransactionTooLargeError(len(run.blocks) + 1, MAX_TXN_BLOCKS, "blocks")
        if end:
            return
        cost = len(block.data) + HELD_BLOCK_OVERHEAD
        if self.used + cost > self.max_bytes:
            self._drop_stale(now_ms)
            if self.used + cost > self.max_bytes:
                raise TransactionBufferFullError(self.used + cost, self.max_bytes)
        if not run.blocks:
            run.since_ms = now_ms
            self._runs[run] = None
        run.blocks.append(block)
        run.data_bytes += len(block.data)
        run.cost += cost
        run.last_event_number = last_event_number
        self.used += cost

    def take(self, run: HeldRun) -> list[Block]:
        """The run's blocks, to write now; the run is empty afterwards."""
        blocks = run.blocks
        self.drop(run)
        return blocks

    def drop(self, run: HeldRun) -> None:
        """Forget the run's blocks (and its expiry): a failure, a new setup, a stream's end."""
        self._release(run)
        run.expired = False

    def _release(self, run: HeldRun) -> None:
        if run.blocks:
            self.used -= run.cost
            self._runs.pop(run, None)
        run.blocks = []
        run.data_bytes = 0
        run.cost = 0
        run.last_event_number = -1

    def _drop_stale(self, now_ms: int) -> None:
        """Drop the runs held longer than ``max_held_ms``; their flows learn it next."""
        oldest = now_ms - self.max_held_ms
        stale = []
        for run in self._runs:
            if run.since_ms >= oldest:
                break
            stale.append(run)
        for run in stale:
            self._release(run)
            run.expired = True


def _check_follows(run: HeldRun, block: Block, last_event_number: int) -> None:
    previous = run.last_event_number
    if previous < 0 and last_event_number < 0:
        return  # not numbered
    if last_event_number - block.event_count != previous:
        first = last_event_number - block.event_count + 1
        raise InvalidEventNumberError(
            f"a block numbered {first} to {last_event_number} does not follow the flow's "
            f"held blocks, which end at number {previous}", previous)
