"""The routing-key hash: a routing key to its point in ``[0, 1)``.

The hash is part of the public contract and is specified, with test vectors,
in ``proto/folio/v1/events.proto``; every Folio client in every language must
compute the same point for the same key. A segment owning ``[low, high)``
receives the keys whose point ``p`` satisfies ``low <= p < high``.
"""

from __future__ import annotations

import hashlib
from bisect import bisect_right
from collections.abc import Sequence

__all__ = ["POINT_BITS", "routing_point", "routing_point_53", "segment_index"]

#: Bits of the integer point: the mantissa width of an IEEE-754 double, so
#: ``point_53 / 2**53`` is exact in every language.
POINT_BITS = 53

_SHIFT = 64 - POINT_BITS
_SCALE = float(1 << POINT_BITS)


def routing_point_53(routing_key: str) -> int:
    """Returns the routing key's point as an integer in ``[0, 2**53)``.

    ``(first 8 bytes of SHA-256(utf-8(routing_key)) as big-endian unsigned
    64-bit) >> 11``, as ``proto/folio/v1/events.proto`` specifies. The key is
    hashed as given, without Unicode normalization; ``""`` is a valid key.

    Args:
        routing_key: the event's routing key.

    Returns:
        The 53-bit integer point; ``routing_point`` is this divided by ``2**53``.

    Raises:
        UnicodeEncodeError: the key holds lone surrogates, which have no UTF-8.
    """
    digest = hashlib.sha256(routing_key.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") >> _SHIFT


def routing_point(routing_key: str) -> float:
    """Returns the routing key's point, a double in ``[0, 1)``.

    ``routing_point_53(routing_key) / 2**53``, exact (a multiple of
    ``2**-53``), as ``proto/folio/v1/events.proto`` specifies.

    Args:
        routing_key: the event's routing key.

    Returns:
        The point; the segment whose key range holds it receives the event.

    Raises:
        UnicodeEncodeError: the key holds lone surrogates, which have no UTF-8.
    """
    return routing_point_53(routing_key) / _SCALE


def segment_index(key_highs: Sequence[float], routing_key: str) -> int:
    """Which of the open segments receives ``routing_key``'s events.

    Args:
        key_highs: the open segments' ``key_high`` bounds, ordered by
            ``key_low`` (their ranges cover ``[0, 1)`` without gaps).
        routing_key: the event's routing key.

    Returns:
        The index of the segment whose ``[key_low, key_high)`` holds the
        key's point; the last one for a point at or past the last bound.
    """
    return min(bisect_right(key_highs, routing_point(routing_key)), len(key_highs) - 1)
