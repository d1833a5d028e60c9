"""A transaction id's three forms, and the only conversions between them.

In memory a txn id is a ``TxnId`` pair ``(high, low)`` (the most and least
significant 64 bits, as Pulsar's TxnID). On the wire (gRPC ``txn_id`` fields,
segment entry headers) it is 16 bytes, most significant half first; all zero
means "no transaction". In logs and persisted JSON records it is those 16
bytes as 32 lowercase hex digits (``txn_id_hex``), which equals ``bytes.hex()``
of the wire form, so records written before this module read the same.
"""

from __future__ import annotations

import struct
from typing import Final

from txnbuffer.api import TxnId

__all__ = [
    "NO_TXN_BYTES",
    "TXN_ID_BYTES",
    "txn_id_from_bytes",
    "txn_id_from_hex",
    "txn_id_hex",
    "txn_id_to_bytes",
]

#: The length of a txn id on the wire.
TXN_ID_BYTES: Final = 16
#: The wire form of "no transaction" (an entry header outside any transaction).
NO_TXN_BYTES: Final = bytes(TXN_ID_BYTES)

_PAIR = struct.Struct(">QQ")
# int(text, 16) alone would also take "+", "_" and spaces.
_HEX_DIGITS: Final = frozenset("0123456789abcdefABCDEF")


def txn_id_to_bytes(txn_id: TxnId) -> bytes:
    """The 16 wire bytes of ``txn_id`` (most significant half first)."""
    return _PAIR.pack(*txn_id)


def txn_id_from_bytes(raw: bytes) -> TxnId | None:
    """The txn id in 16 wire bytes; None for ``NO_TXN_BYTES``.

    Raises:
        ValueError: ``raw`` is not 16 bytes (callers check user input first).
    """
    if raw == NO_TXN_BYTES:
        return None
    try:
        high, low = _PAIR.unpack(raw)
    except struct.error:
        raise ValueError(f"a txn id is {TXN_ID_BYTES} bytes, got {len(raw)}") from None
    return (high, low)


def txn_id_hex(txn_id: TxnId) -> str:
    """``txn_id`` as 32 hex digits, as logs and persisted records spell it."""
    return f"{txn_id[0]:016x}{txn_id[1]:016x}"


def txn_id_from_hex(text: str) -> TxnId:
    """The txn id ``txn_id_hex`` spelled (upper case digits too, as ``bytes.fromhex``).

    Raises:
        ValueError: ``text`` is not 32 hex digits, or all zero ("no
            transaction" is never a stored transaction's id).
    """
    if len(text) != 2 * TXN_ID_BYTES or not _HEX_DIGITS.issuperset(text):
        raise ValueError(f"a txn id is {2 * TXN_ID_BYTES} hex digits, got {text!r}")
    txn_id = (int(text[:16], 16), int(text[16:], 16))
    if txn_id == (0, 0):
        raise ValueError("the all-zero txn id means no transaction")
    return txn_id
