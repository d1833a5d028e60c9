"""The txn id conversions: pair <-> wire bytes <-> hex, and their refusals."""

from __future__ import annotations

import uuid

import pytest

from txnbuffer.txn_ids import (
    NO_TXN_BYTES,
    TXN_ID_BYTES,
    txn_id_from_bytes,
    txn_id_from_hex,
    txn_id_hex,
    txn_id_to_bytes,
)


def test_round_trips_and_hex_matches_the_wire_bytes() -> None:
    raw = uuid.uuid4().bytes
    txn_id = txn_id_from_bytes(raw)
    assert txn_id is not None
    assert txn_id_to_bytes(txn_id) == raw
    # Records written as bytes.hex() before the pair existed read the same.
    assert txn_id_hex(txn_id) == raw.hex()
    assert txn_id_from_hex(raw.hex()) == txn_id


def test_most_significant_half_first() -> None:
    assert txn_id_to_bytes((1, 2)) == bytes(7) + b"\x01" + bytes(7) + b"\x02"
    assert txn_id_hex((1, 2)) == "0000000000000001" + "0000000000000002"


def test_no_txn_is_none_and_bad_lengths_are_refused() -> None:
    assert len(NO_TXN_BYTES) == TXN_ID_BYTES
    assert txn_id_from_bytes(NO_TXN_BYTES) is None
    with pytest.raises(ValueError, match="16 bytes, got 3"):
        txn_id_from_bytes(b"abc")
    with pytest.raises(ValueError, match="32 hex digits"):
        txn_id_from_hex("abcd")


@pytest.mark.parametrize("text", ["+" + "0" * 30 + "1", "0" * 15 + "_" + "0" * 15 + "1",
                                  " " + "0" * 30 + "1", "g" * 32])
def test_hex_takes_hex_digits_only(text: str) -> None:
    # int(..., 16) alone would take "+", "_" and spaces; bytes.fromhex (the old reader) did not.
    with pytest.raises(ValueError, match="32 hex digits"):
        txn_id_from_hex(text)


def test_hex_refuses_the_no_txn_id_and_takes_upper_case() -> None:
    with pytest.raises(ValueError, match="no transaction"):
        txn_id_from_hex("0" * 32)
    assert txn_id_from_hex("AB" * 16) == txn_id_from_hex("ab" * 16)
