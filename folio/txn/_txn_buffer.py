"""A single-routing-key transaction's events, packed into blocks: the batching side.

``SingleRoutingKeyTransaction.write_event`` adds each event here (under the
transaction's lock); a block is cut before an event that would take it past
``TXN_BLOCK_BYTES``; the transaction as a whole may not pass
``MAX_TRANSACTION_BYTES`` (the broker's limit, PDP-44). ``take`` hands the
blocks over as one ``TxnCommit``. No IO, no locking of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from folio.api.v1.block import encode_block
from folio.errors import MaxTransactionSizeExceededError
from folio.txn._txn_commit import MAX_TRANSACTION_BYTES, TxnCommit

__all__ = ["TXN_BLOCK_BYTES", "TxnBuffer"]

#: A transaction's events are packed into blocks of about this size.
TXN_BLOCK_BYTES: Final = 1024 * 1024
#: Framing counted per block (format version, packed column prefixes).
_BLOCK_OVERHEAD_BYTES: Final = 32
_NO_HEADERS: Final[Mapping[str, bytes]] = {}


class TxnBuffer:
    """The blocks cut so far and the events of the block being filled, by column."""

    __slots__ = ("_any_headers", "_block_size", "_blocks", "_headers", "_payloads",
                 "_timestamps", "count", "routing_key", "size")

    def __init__(self, routing_key: str) -> None:
        self.routing_key = routing_key
        self._blocks: list[tuple[bytes, int]] = []
        self._payloads: list[bytes] = []
        self._timestamps: list[int] = []
        self._headers: list[Mapping[str, bytes]] | None = None
        self._any_headers = False  # whether some block has a headers column
        self._block_size = 0
        #: Bytes of the transaction as counted against ``MAX_TRANSACTION_BYTES``.
        self.size = 0
        #: Events added.
        self.count = 0

    def add(self, payload: bytes, size_bytes: int, headers: Mapping[str, bytes] | None,
            timestamp_ms: int) -> None:
        """Adds one event of ``size_bytes`` (as packed), cutting a block first if needed.

        Raises:
            MaxTransactionSizeExceededError: the event would take the
                transaction past ``MAX_TRANSACTION_BYTES``; it is not added.
        """
        block_size = self._block_size
        cut = block_size > 0 and block_size + size_bytes > TXN_BLOCK_BYTES
        added = size_bytes + (_BLOCK_OVERHEAD_BYTES if cut or not block_size else 0)
        total = self.size + added
        if total > MAX_TRANSACTION_BYTES:
            raise MaxTransactionSizeExceededError(
                f"the event of {len(payload)} bytes would take the transaction to "
                f"{total} bytes, above the limit of {MAX_TRANSACTION_BYTES} bytes; it was "
                "not added", size=total, limit=MAX_TRANSACTION_BYTES)
        if cut:
            self.cut()
        self._payloads.append(payload)
        self._timestamps.append(timestamp_ms)
        if headers:
            if self._headers is None:
                self._headers = [_NO_HEADERS] * (len(self._payloads) - 1)
            self._headers.append(dict(headers))
        elif self._headers is not None:
            self._headers.append(_NO_HEADERS)
        self._block_size += added
        self.size = total
        self.count += 1

    def cut(self) -> None:
        """Packs the buffered events into one block."""
        if not self._payloads:
            return
        count = len(self._payloads)
        data = encode_block(self._payloads, [self.routing_key] * count, self._timestamps,
                            self._headers)
        if self._headers is not None:
            self._any_headers = True
        self._blocks.append((data, count))
        self._payloads = []
        self._timestamps = []
        self._headers = None
        self._block_size = 0

    def take(self) -> TxnCommit:
        """Cuts the last block and hands every block over, as one commit."""
        self.cut()
        blocks, self._blocks = self._blocks, []
        commit = TxnCommit(blocks, self.count, self.size)
        commit.has_headers = self._any_headers
        return commit

    def release(self) -> None:
        """Drops every event (abort, timeout)."""
        self._blocks = []
        self._payloads = []
        self._timestamps = []
        self._headers = None
        self._block_size = 0
