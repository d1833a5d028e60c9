"""The broker's checks of a client's event blocks (broker.segments.block_limits), block by block."""

from __future__ import annotations

import pytest

from broker.api import Block
from broker.errors import EventTooLargeError, InvalidBlockError
from broker.segments.block_limits import MAX_BLOCK_BYTES, check_blocks
from folio.api.v1 import block as sdk_block
from folio.api.v1.block import encode_block
from folio.api.v1.events_pb2 import EventBlock

KIB = 1024


def _block(payloads: list[bytes], count: int | None = None) -> Block:
    return Block(encode_block(payloads), len(payloads) if count is None else count)


def test_valid_blocks_pass() -> None:
    check_blocks([_block([b"a", b"bb"]), _block([b"x" * 1000])], max_event_bytes=1000)
    keyed = encode_block([b"a", b"b"], routing_keys=["k", ""], timestamps_ms=[1, 2],
                         headers=[{"h": b"v"}, {}])
    check_blocks([Block(keyed, 2)], max_event_bytes=1)


def test_one_large_event_among_small_ones_is_refused_naming_size_and_limit() -> None:
    payloads = [b"s" * 10] * 100 + [b"L" * (2 * KIB)] + [b"s" * 10] * 100
    with pytest.raises(EventTooLargeError) as raised:
        check_blocks([_block([b"ok"]), _block(payloads)], max_event_bytes=KIB)
    assert (raised.value.size, raised.value.limit) == (2 * KIB, KIB)
    assert "2048 bytes exceeds the limit of 1024 bytes (max_event_bytes)" in str(raised.value)


def test_a_block_above_the_block_limit_is_refused() -> None:
    data = encode_block([b"x" * (1024 * KIB)] * 9)  # 9 MiB of small-enough events
    with pytest.raises(EventTooLargeError, match="block of") as raised:
        check_blocks([Block(data, 9)], max_event_bytes=4 * 1024 * KIB)
    assert raised.value.limit == MAX_BLOCK_BYTES


def test_event_count_must_match_the_payloads() -> None:
    with pytest.raises(InvalidBlockError, match="holds 2 payloads but states event_count 3"):
        check_blocks([_block([b"a", b"b"], count=3)], max_event_bytes=KIB)


@pytest.mark.parametrize(("data", "match"), [
    (b"\xff\xff\xff", "is not a folio.v1.EventBlock"),
    (EventBlock(payloads=[b"a"]).SerializeToString(), "format_version 0"),
    (EventBlock(format_version=1, payloads=[b"a", b"b"],
                routing_keys=["k"]).SerializeToString(), "column routing_keys has 1 values"),
])
def test_blocks_no_reader_could_read_are_refused(data: bytes, match: str) -> None:
    with pytest.raises(InvalidBlockError, match=match):
        check_blocks([Block(data, 2 if b"b" in data else 1)], max_event_bytes=KIB)


def test_the_sdk_and_the_broker_share_the_block_limit() -> None:
    assert sdk_block.MAX_BLOCK_BYTES == MAX_BLOCK_BYTES
