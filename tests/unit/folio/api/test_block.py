"""Event blocks: round trips, the proto's test vector, and every refusal."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from folio.api.v1.block import FORMAT_VERSION, DecodedBlock, decode_block, encode_block
from folio.api.v1.events_pb2 import EventBlock, Headers
from folio.errors import FolioError, InvalidBlockError

PROTO = Path(__file__).resolve().parents[4] / "proto" / "folio" / "v1" / "events.proto"

# The two events of the test vector in proto/folio/v1/events.proto.
VECTOR_PAYLOADS = [b"hello", b"\x00\xff\x00"]
VECTOR_KEYS = ["user-1", ""]
VECTOR_TIMESTAMPS_MS = [1_700_000_000_000, 1_700_000_000_001]
VECTOR_HEADERS: list[dict[str, bytes]] = [{"content-type": b"text/plain"}, {}]
VECTOR_HEX = (
    "0801120568656c6c6f120300ff001a06757365722d311a00220c80d095ffbc31"
    "81d095ffbc312a1c0a1a0a0c636f6e74656e742d74797065120a746578742f706c61696e2a00"
)


def _proto_vector_hex() -> str:
    """The block test vector's hex, as written in the proto comment."""
    text = PROTO.read_text(encoding="utf-8")
    found = re.search(r"is the block \(hex, (\d+) bytes\):\n((?://\s+[0-9a-f]+\n)+)", text)
    assert found is not None, "no block test vector in events.proto"
    hex_text = "".join(line.removeprefix("//").strip() for line in found[2].splitlines())
    assert len(hex_text) == 2 * int(found[1])
    return hex_text


def test_vector_in_proto_is_the_one_tested() -> None:
    assert _proto_vector_hex() == VECTOR_HEX


def test_encoder_produces_the_test_vector() -> None:
    data = encode_block(VECTOR_PAYLOADS, VECTOR_KEYS, VECTOR_TIMESTAMPS_MS, VECTOR_HEADERS)
    assert data.hex() == VECTOR_HEX


def test_decoder_reads_the_test_vector() -> None:
    assert decode_block(bytes.fromhex(VECTOR_HEX)) == DecodedBlock(
        payloads=VECTOR_PAYLOADS,
        routing_keys=VECTOR_KEYS,
        timestamps_ms=VECTOR_TIMESTAMPS_MS,
        headers=VECTOR_HEADERS,
    )


def test_decoder_accepts_a_non_deterministic_encoding() -> None:
    # Fields out of number order and unpacked timestamps: still the same block.
    reordered = (
        bytes.fromhex("1a0161")  # routing_keys[0] = "a"
        + bytes.fromhex("2001")  # timestamps_ms[0] = 1, unpacked
        + bytes.fromhex("120178")  # payloads[0] = "x"
        + bytes.fromhex("0801")  # format_version = 1
    )
    assert decode_block(reordered) == DecodedBlock(
        payloads=[b"x"], routing_keys=["a"], timestamps_ms=[1]
    )


def test_empty_block_round_trips() -> None:
    data = encode_block([])
    assert data == bytes.fromhex("0801")  # a block always states its version
    decoded = decode_block(data)
    assert decoded == DecodedBlock(payloads=[])
    assert decoded.event_count == 0


def test_one_event_round_trips() -> None:
    decoded = decode_block(encode_block([b"payload"], ["key"], [42], [{"h": b"v"}]))
    assert decoded == DecodedBlock([b"payload"], ["key"], [42], [{"h": b"v"}])
    assert decoded.event_count == 1


def test_ten_thousand_events_round_trip() -> None:
    count = 10_000
    payloads = [i.to_bytes(4, "big") * (i % 7) for i in range(count)]
    keys = [f"key-{i % 97}" for i in range(count)]
    timestamps_ms = [1_700_000_000_000 + i for i in range(count)]
    headers = [{"n": str(i).encode()} if i % 3 else {} for i in range(count)]
    decoded = decode_block(encode_block(payloads, keys, timestamps_ms, headers))
    assert decoded.event_count == count
    assert decoded == DecodedBlock(payloads, keys, timestamps_ms, headers)


@pytest.mark.parametrize("with_keys", [False, True])
@pytest.mark.parametrize("with_timestamps", [False, True])
@pytest.mark.parametrize("with_headers", [False, True])
def test_optional_columns_round_trip(
    with_keys: bool, with_timestamps: bool, with_headers: bool
) -> None:
    payloads = [b"a", b"", b"c"]
    keys = ["", "k", "日本"] if with_keys else None
    timestamps_ms = [0, -1, 2**63 - 1] if with_timestamps else None
    headers = [{}, {"x": b"\x00"}, {"a": b"", "b": b"2"}] if with_headers else None
    decoded = decode_block(encode_block(payloads, keys, timestamps_ms, headers))
    assert decoded == DecodedBlock(
        payloads=payloads,
        routing_keys=keys or [],
        timestamps_ms=timestamps_ms or [],
        headers=headers or [],
    )


def test_binary_payloads_with_zero_bytes_round_trip() -> None:
    payloads = [b"\x00", b"\x00" * 1000, bytes(range(256)), b"", b"a\x00b"]
    assert decode_block(encode_block(payloads)).payloads == payloads


def test_encoding_is_deterministic_for_headers() -> None:
    forward = {"a": b"1", "b": b"2", "c": b"3"}
    backward = dict(reversed(forward.items()))
    assert encode_block([b"x"], headers=[forward]) == encode_block([b"x"], headers=[backward])


@pytest.mark.parametrize(
    "garbage",
    [
        b"\xff\xff\xff",  # not protobuf at all
        b"\x08",  # a tag without its value
        bytes.fromhex(VECTOR_HEX)[:-5],  # the test vector, truncated
        b"\x08\x01\x1a\x02\xff\xfe",  # a routing key that is not UTF-8
        b"hello world",
    ],
)
def test_garbage_is_refused(garbage: bytes) -> None:
    with pytest.raises(InvalidBlockError, match="not an event block"):
        decode_block(garbage)


def test_no_version_is_refused() -> None:
    # Empty bytes parse as a message with every field unset: version 0.
    with pytest.raises(InvalidBlockError, match="unknown event block format version 0"):
        decode_block(b"")


def test_unknown_version_is_refused() -> None:
    data = EventBlock(format_version=3, payloads=[b"x"]).SerializeToString()
    with pytest.raises(InvalidBlockError, match="unknown event block format version 3"):
        decode_block(data)


def test_format_2_without_a_kafka_batch_is_refused() -> None:
    # Format 2 is a Kafka record batch (tests/unit/broker/kafka/test_blocks.py).
    data = EventBlock(format_version=2, payloads=[b"x"]).SerializeToString()
    with pytest.raises(InvalidBlockError, match="not a Kafka record batch"):
        decode_block(data)


@pytest.mark.parametrize(
    "message",
    [
        EventBlock(format_version=1, payloads=[b"a", b"b"], routing_keys=["k"]),
        EventBlock(format_version=1, payloads=[b"a"], timestamps_ms=[1, 2]),
        EventBlock(format_version=1, payloads=[b"a", b"b"], headers=[Headers()]),
        EventBlock(format_version=1, routing_keys=["k"]),  # keys for no event
    ],
)
def test_mismatched_columns_are_refused_on_decode(message: EventBlock) -> None:
    with pytest.raises(InvalidBlockError, match="values for"):
        decode_block(message.SerializeToString())


@pytest.mark.parametrize(
    "columns",
    [
        {"routing_keys": ["k"]},
        {"routing_keys": []},
        {"timestamps_ms": [1, 2, 3]},
        {"headers": [{}]},
    ],
)
def test_mismatched_columns_are_refused_on_encode(columns: dict[str, list[object]]) -> None:
    with pytest.raises(InvalidBlockError, match="values for 2 events"):
        encode_block([b"a", b"b"], **columns)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "columns",
    [
        {"timestamps_ms": [2**63]},
        {"routing_keys": ["\ud800"]},  # a lone surrogate has no UTF-8
        {"headers": [{"\ud800": b"v"}]},
    ],
)
def test_values_the_format_cannot_hold_are_refused(columns: dict[str, list[object]]) -> None:
    with pytest.raises(InvalidBlockError, match="cannot be packed"):
        encode_block([b"a"], **columns)  # type: ignore[arg-type]


def test_invalid_block_error_is_a_folio_error_and_not_retriable() -> None:
    assert issubclass(InvalidBlockError, FolioError)
    assert InvalidBlockError.retriable is False
    assert FORMAT_VERSION == 1
