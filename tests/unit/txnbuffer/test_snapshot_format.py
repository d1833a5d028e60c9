"""The persisted snapshot format: versioned, chunked under a size limit, round-trips."""

from __future__ import annotations

import itertools

import pytest

from txnbuffer import EARLIEST, Position, SnapshotFormatError
from txnbuffer.snapshot import HEADER, ITEM_BYTES, decode_record, encode_snapshot


def test_many_chunks_round_trip_and_respect_the_limit() -> None:
    txn_ids = [(2**64 - 1 - i, i) for i in range(1000)]
    positions = [Position(i // 100, i % 100) for i in range(1000)]
    chunk_bytes = HEADER.size + 3 * ITEM_BYTES
    records = encode_snapshot(7, txn_ids, positions, Position(9, 99), chunk_bytes)
    assert len(records) == 334  # 333 full chunks of 3, then the end with 1
    assert all(len(record) <= chunk_bytes for record in records)
    decoded = [decode_record(f"s-{i}", record) for i, record in enumerate(records, 1)]
    assert [r.is_end for r in decoded] == [False] * 333 + [True]
    assert decoded[-1].index == 333
    assert decoded[-1].max_read_position == Position(9, 99)
    assert decoded[0].low == EARLIEST
    assert all(a.high == b.low for a, b in itertools.pairwise(decoded))
    got_txns: list[tuple[int, int]] = []
    got_positions: list[Position] = []
    for record in decoded:
        txns, where = record.aborts()
        got_txns += txns
        got_positions += where
    assert got_txns == txn_ids
    assert got_positions == positions


def test_empty_snapshot_is_one_end_record() -> None:
    (record,) = encode_snapshot(1, [], [], EARLIEST, 4096)
    decoded = decode_record("s-end", record)
    assert decoded.is_end
    assert decoded.count == 0
    assert decoded.max_read_position == EARLIEST


def test_unknown_version_and_garbage_are_refused() -> None:
    (record,) = encode_snapshot(1, [(1, 2)], [Position(0, 0)], Position(0, 0), 4096)
    future = record[:4] + (2).to_bytes(2, "little") + record[6:]
    with pytest.raises(SnapshotFormatError, match="format_version 2"):
        decode_record("s-end", future)
    with pytest.raises(SnapshotFormatError, match="bad magic"):
        decode_record("s-end", b"x" * len(record))
    with pytest.raises(SnapshotFormatError, match="bytes for 1 aborts"):
        decode_record("s-end", record[:-1])


def test_chunk_bytes_must_hold_one_abort() -> None:
    with pytest.raises(ValueError, match="cannot hold one abort"):
        encode_snapshot(1, [], [], EARLIEST, HEADER.size)
