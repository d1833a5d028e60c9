"""A single-routing-key transaction as it travels: its blocks, its result, the limits.

``TxnCommit`` is what ``SingleRoutingKeyTransaction.commit_async`` hands the
writer's flow (``folio.txn._txn_flow``): the encoded blocks, kept until
acknowledged, and the future of its :class:`TransactionResult`.
``merged_blocks`` joins the blocks of coalesced transactions into fewer,
larger ``AppendBlock`` commands. No IO here.
"""

from __future__ import annotations

import concurrent.futures
from dataclasses import dataclass
from typing import Final

__all__ = ["MAX_TRANSACTION_BYTES", "MERGED_BLOCK_BYTES", "TransactionResult", "TxnCommit",
           "merged_blocks"]

#: Blocks of one sequence are joined into AppendBlocks of at most about this size.
MERGED_BLOCK_BYTES: Final = 1024 * 1024
#: The most bytes of blocks one transaction (and one sequence) may hold: the
#: broker's limit per transaction, its end block included.
MAX_TRANSACTION_BYTES: Final = 16 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class TransactionResult:
    """Where a committed transaction went.

    Attributes:
        segment: the segment its events were written to.
        offset: the offset of its first event (its events follow at
            consecutive offsets), or -1 when the commit was confirmed only
            after a reconnect (the broker had written it; the offset is
            unknown) or the transaction was empty.
        event_count: how many events it holds.
    """

    segment: str
    offset: int
    event_count: int


class TxnCommit:
    """One transaction on its way: its blocks (kept until acknowledged) and its future."""

    __slots__ = ("blocks", "done", "event_count", "future", "has_headers",
                 "last_event_number", "size")

    def __init__(self, blocks: list[tuple[bytes, int]], event_count: int, size: int) -> None:
        #: ``(encoded block, event count)`` in order.
        self.blocks = blocks
        self.event_count = event_count
        self.size = size
        self.future: concurrent.futures.Future[TransactionResult] = concurrent.futures.Future()
        #: The number of its last event on the current segment, set on the first
        #: send there (``folio._flow.FlowUnit``); its events run up to it.
        self.last_event_number: int | None = None
        self.done = False
        #: Whether a block has a headers column (then its blocks are never merged).
        self.has_headers = False

    def reset_numbers(self) -> None:
        """Forget the numbers (before the transaction moves to another segment)."""
        self.last_event_number = None


def merged_blocks(group: list[TxnCommit]) -> list[tuple[bytes, int]]:
    """The group's blocks in order, consecutive ones joined up to ``MERGED_BLOCK_BYTES``.

    Serialized ``EventBlock`` messages concatenate into one (protobuf merges
    repeated fields in order; ``format_version`` is 1 in each), so a sequence
    of small transactions costs the broker one command instead of one per
    transaction. Only blocks without a headers column are joined: a block
    whose events have headers beside one whose events have none would make
    columns of different lengths.
    """
    out: list[tuple[bytes, int]] = []
    parts: list[bytes] = []
    size = count = 0
    for commit in group:
        for data, events in commit.blocks:
            if commit.has_headers:
                if parts:
                    out.append((b"".join(parts), count))
                    parts, size, count = [], 0, 0
                out.append((data, events))
                continue
            if parts and size + len(data) > MERGED_BLOCK_BYTES:
                out.append((b"".join(parts), count))
                parts, size, count = [], 0, 0
            parts.append(data)
            size += len(data)
            count += events
    if parts:
        out.append((b"".join(parts), count))
    return out
