"""One full transaction's events of one segment, packed into blocks: the batching side.

``Transaction.write_event`` appends an event to its segment's ``SegmentBuffer``
and cuts a block (``folio.api.v1.block``) when the next event would pass
``TXN_FULL_BLOCK_BYTES``; ``flush`` hands the blocks to the segment's flow
(``folio.txn._full_flow``). No IO here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from folio.api.v1.block import encode_block

__all__ = ["TXN_FULL_BLOCK_BYTES", "SegmentBuffer"]

#: A segment's buffered events are packed into blocks of about this size.
TXN_FULL_BLOCK_BYTES: Final = 1024 * 1024


class SegmentBuffer:
    """One segment's events not yet packed, and its packed blocks not yet sent."""

    __slots__ = ("blocks", "headers", "keyed", "keys", "payloads", "size", "timestamps")

    def __init__(self) -> None:
        self.payloads: list[bytes] = []
        self.keys: list[str] = []
        #: Whether the unpacked events have routing keys: a block's key column
        #: is all or nothing (events.proto), so keyed and keyless events never
        #: share a block ("" is a key, not "no key").
        self.keyed = False
        self.timestamps: list[int] = []
        self.headers: list[Mapping[str, bytes]] = []
        self.size = 0
        self.blocks: list[tuple[bytes, int]] = []

    def add(self, payload: bytes, routing_key: str | None, timestamp_ms: int,
            headers: Mapping[str, bytes] | None, size_bytes: int) -> None:
        """Buffers one event of ``size_bytes`` (as packed), cutting a block first if needed.

        A block is cut before an event that would take it past
        ``TXN_FULL_BLOCK_BYTES``, or whose having a key differs from the
        buffered events'.
        """
        keyed = routing_key is not None
        if self.payloads and (self.keyed != keyed
                              or self.size + size_bytes > TXN_FULL_BLOCK_BYTES):
            self.cut()
        self.keyed = keyed
        self.payloads.append(payload)
        self.keys.append(routing_key or "")
        self.timestamps.append(timestamp_ms)
        self.headers.append(dict(headers) if headers else {})
        self.size += size_bytes

    def cut(self) -> None:
        """Packs the buffered events into one block (none when empty)."""
        if not self.payloads:
            return
        headers = self.headers if any(self.headers) else None
        keys = self.keys if self.keyed else None
        self.blocks.append((encode_block(self.payloads, keys, self.timestamps, headers),
                            len(self.payloads)))
        self.payloads, self.keys, self.timestamps, self.headers = [], [], [], []
        self.size = 0
