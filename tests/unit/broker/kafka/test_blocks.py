"""Kafka batches in Folio blocks and back, and what the SDK reads out of them."""

from __future__ import annotations

from typing import Any

import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from broker.api import ReadBlock
from broker.errors import CorruptDataError
from broker.kafka.blocks import batch_of_block, block_of_batch
from folio.api.v1.block import decode_block, encode_block
from folio.api.v1.events_pb2 import EventBlock
from folio.errors import InvalidBlockError


def kafka_batch(records: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]],
                compression: int = 0) -> bytes:
    builder: Any = DefaultRecordBatchBuilder(
        magic=2, compression_type=compression, is_transactional=False, producer_id=-1,
        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for index, (key, value, headers) in enumerate(records):
        builder.append(index, 1_700_000_000_000 + index, key, value, headers)
    return bytes(builder.build())


@pytest.mark.parametrize("compression", [0, 1, 2, 3, 4])
def test_a_wrapped_batch_is_an_event_block_of_format_2(compression: int) -> None:
    batch = kafka_batch([(b"k1", b"v1", [("h", b"1")]), (b"k2", b"v2", [])], compression)
    block = block_of_batch(batch)
    message = EventBlock.FromString(block)
    assert (message.format_version, message.kafka_record_batch) == (2, batch)
    decoded = decode_block(block)
    assert decoded.payloads == [b"v1", b"v2"]
    assert decoded.routing_keys == ["k1", "k2"]
    assert decoded.timestamps_ms == [1_700_000_000_000, 1_700_000_000_001]
    assert decoded.headers == [{"h": b"1"}, {}]


def test_null_keys_values_and_header_values() -> None:
    none_keyed = decode_block(block_of_batch(kafka_batch([(None, b"a", []), (None, None, [])])))
    assert (none_keyed.routing_keys, none_keyed.payloads, none_keyed.headers) == (
        [], [b"a", b""], [])
    mixed = decode_block(block_of_batch(kafka_batch([(b"\xff", b"a", [("x", b"")]),
                                                     (None, b"b", [])])))
    assert mixed.routing_keys == ["\udcff", ""]
    assert mixed.routing_keys[0].encode("utf-8", "surrogateescape") == b"\xff"


def test_a_damaged_batch_is_an_invalid_block_for_the_sdk() -> None:
    batch = bytearray(kafka_batch([(b"k", b"v", [])]))
    batch[-1] ^= 1
    with pytest.raises(InvalidBlockError, match="CRC32C"):
        decode_block(block_of_batch(bytes(batch)))


def test_fetch_serves_a_stored_batch_at_the_block_offset() -> None:
    batch = kafka_batch([(b"k", b"v", []), (b"l", b"w", [])])
    served: Any = DefaultRecordBatch(batch_of_block(ReadBlock(70, 2, block_of_batch(batch))))
    assert served.validate_crc()
    assert [(r.offset, r.key, r.value) for r in served] == [(70, b"k", b"v"), (71, b"l", b"w")]


def test_sdk_blocks_are_converted_record_by_record() -> None:
    data = encode_block([b"p0", b"p1"], routing_keys=["a", "é"],
                        timestamps_ms=[5, 6], headers=[{"x": b"1"}, {}])
    served: Any = DefaultRecordBatch(batch_of_block(ReadBlock(10, 2, data)))
    assert served.validate_crc()
    assert [(r.offset, r.key, r.value, r.timestamp, r.headers) for r in served] == [
        (10, b"a", b"p0", 5, [("x", b"1")]), (11, "é".encode(), b"p1", 6, [])]
    bare: Any = DefaultRecordBatch(batch_of_block(ReadBlock(0, 1, encode_block([b"z"]))))
    assert [(r.key, r.value, r.timestamp) for r in bare] == [(None, b"z", -1)]


def test_bytes_that_are_no_block_are_corrupt_data() -> None:
    with pytest.raises(CorruptDataError):
        batch_of_block(ReadBlock(0, 1, b"\xff\xff\xff"))
    with pytest.raises(CorruptDataError, match="unknown format 7"):
        batch_of_block(ReadBlock(0, 1, EventBlock(format_version=7).SerializeToString()))
