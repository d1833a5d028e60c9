"""Record batch headers on the broker: split, check (CRC32C, magic, counts), base offset."""

from __future__ import annotations

from typing import Any

import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from broker.kafka.batches import (
    BATCH_HEADER_BYTES,
    InvalidBatchError,
    max_timestamp,
    parse_batch,
    split_batches,
    with_base_offset,
)


def make_batch(values: list[bytes], *, producer_id: int = -1, epoch: int = -1,
               base_sequence: int = -1, compression: int = 0,
               transactional: bool = False) -> bytes:
    builder: Any = DefaultRecordBatchBuilder(
        magic=2, compression_type=compression, is_transactional=transactional,
        producer_id=producer_id, producer_epoch=epoch, base_sequence=base_sequence,
        batch_size=1 << 20)
    for index, value in enumerate(values):
        builder.append(index, 1_700_000_000_000 + index, b"k", value, [])
    return bytes(builder.build())


def test_header_of_an_idempotent_batch() -> None:
    batch = make_batch([b"a", b"b", b"c"], producer_id=42, epoch=3, base_sequence=10)
    header = parse_batch(batch)
    assert (header.records_count, header.last_offset_delta) == (3, 2)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (42, 3, 10)
    assert header.last_sequence == 12
    assert not header.transactional and not header.control and not header.log_append_time
    assert max_timestamp(batch) == 1_700_000_000_002


@pytest.mark.parametrize("compression", [1, 2, 3, 4])
def test_compressed_batches_are_checked_without_decoding(compression: int) -> None:
    header = parse_batch(make_batch([b"x" * 100] * 50, compression=compression))
    assert header.records_count == 50
    assert header.attributes & 0x07 == compression


def test_transactional_flag() -> None:
    assert parse_batch(make_batch([b"a"], producer_id=1, epoch=0, base_sequence=0,
                                  transactional=True)).transactional


def test_a_changed_byte_fails_the_crc() -> None:
    batch = bytearray(make_batch([b"hello"]))
    batch[-1] ^= 1
    with pytest.raises(InvalidBatchError, match="CRC32C") as error:
        parse_batch(bytes(batch))
    assert error.value.corrupt


def test_old_magic_and_bad_counts_are_invalid_not_corrupt() -> None:
    batch = bytearray(make_batch([b"hello"]))
    batch[16] = 1
    with pytest.raises(InvalidBatchError, match="magic 1") as error:
        parse_batch(bytes(batch))
    assert not error.value.corrupt


def test_split_finds_each_batch_by_its_length() -> None:
    one, two = make_batch([b"a"]), make_batch([b"b", b"c"])
    assert split_batches(one + two) == [one, two]
    assert split_batches(b"") == []
    with pytest.raises(InvalidBatchError, match="cut"):
        split_batches(one[:BATCH_HEADER_BYTES - 1])
    with pytest.raises(InvalidBatchError, match="does not fit"):
        split_batches(one[:-1])


def test_base_offset_is_set_outside_the_crc() -> None:
    batch = make_batch([b"a", b"b"])
    moved = with_base_offset(batch, 1234)
    parsed: Any = DefaultRecordBatch(moved)
    assert parsed.base_offset == 1234
    assert parsed.validate_crc()
    assert [record.offset for record in parsed] == [1234, 1235]
    assert parse_batch(moved).records_count == 2
