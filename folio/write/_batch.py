"""The caller side's open batch of one segment writer, and resending events after a seal.

``OpenBatch`` holds the events of the block being filled, column by column,
until ``SegmentWriter`` cuts it into a block; ``resend`` passes a sealed
segment's unwritten events on through the event writer's routing
(``Forward``). Both were part of ``folio.write._segment_writer``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from folio.write._write_future import BlockOutcome, WriteFuture

__all__ = ["Forward", "OpenBatch", "resend"]


#: Passes one event on (after a seal): payload, key, headers, timestamp, size, force.
Forward = Callable[[bytes, "str | None", "Mapping[str, bytes] | None", int, int, bool],
                   WriteFuture]


class OpenBatch:
    """The events of the block being filled, by column."""

    __slots__ = ("count", "headers", "keyless", "keys", "outcome", "payloads", "size",
                 "started", "timestamps")

    def __init__(self, segment: str, keyless: bool) -> None:
        self.payloads: list[bytes] = []
        self.keys: list[str] = []
        self.timestamps: list[int] = []
        self.headers: list[Mapping[str, bytes]] | None = None
        self.count = 0
        self.size = 0
        self.keyless = keyless
        self.outcome = BlockOutcome(segment)
        self.started = time.monotonic()


def resend(forward: Forward, payloads: list[bytes], keys: list[str],
            timestamps: list[int], headers: list[Mapping[str, bytes]] | list[dict[str, bytes]],
            ) -> list[WriteFuture]:
    """Each event again through ``forward`` (never waiting), in order; their futures."""
    futures = []
    for index, payload in enumerate(payloads):
        key = keys[index] if keys else None
        futures.append(forward(payload, key, headers[index] if headers else None,
                               timestamps[index] if timestamps else 0,
                               len(payload) + (len(key) if key else 0), True))
    return futures
