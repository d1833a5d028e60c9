"""The routing-key hash, for the one place the broker routes events itself: ``Produce``.

Specified, with test vectors, in ``proto/folio/v1/events.proto``; clients route
with their own implementation of the same rule (the SDK's is
``folio.routing``), and both are tested against the proto's vectors.
"""

from __future__ import annotations

import hashlib
from bisect import bisect_right
from collections.abc import Sequence

__all__ = ["routing_point", "segment_for_key"]

_SCALE = float(1 << 53)


def routing_point(routing_key: str) -> float:
    """The key's point in ``[0, 1)``: first 8 bytes of SHA-256, big-endian, >> 11, / 2**53."""
    digest = hashlib.sha256(routing_key.encode("utf-8")).digest()
    return (int.from_bytes(digest[:8], "big") >> 11) / _SCALE


def segment_for_key(key_lows: Sequence[float], routing_key: str) -> int:
    """The index of the range holding the key, given the ranges' sorted lower bounds."""
    return bisect_right(key_lows, routing_point(routing_key)) - 1
