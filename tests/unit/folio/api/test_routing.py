"""The routing-key hash: the proto's test vectors, exactness and spread."""

from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path

import pytest

from folio.api.v1.routing import POINT_BITS, routing_point, routing_point_53, segment_index

PROTO = Path(__file__).resolve().parents[4] / "proto" / "folio" / "v1" / "events.proto"

# key, utf-8 hex, sha256[0..8] hex, point_53, point with 17 significant digits:
# the same as in the comment of proto/folio/v1/events.proto.
VECTORS = [
    ("", "", "e3b0c44298fc1c14", 8011147086339971, "0.88941599489133727"),
    ("a", "61", "ca978112ca1bbdca", 7128065739670391, "0.79137427052238152"),
    ("user-1", "757365722d31", "c6c289e49e9c05b2", 6993242861327232, "0.77640592414410037"),
    ("héllo", "68c3a96c6c6f", "3c48591d8d098a45", 2121005773463857, "0.23547894450624629"),
    ("日本", "e697a5e69cac", "cf2abf0c5be326cb", 7289040026696804, "0.80924600650531575"),
]

_PROTO_VECTOR = re.compile(
    r'//   key (".*?")\s+utf-8 = ([0-9a-f ]+|\(no bytes\))\n'
    r"//\s+sha256\[0\.\.8\] = ([0-9a-f]{16})\n"
    r"//\s+point_53\s+= (\d+)\n"
    r"//\s+point\s+= ([0-9.]+)\n"
)


def test_proto_comment_holds_exactly_these_vectors() -> None:
    text = PROTO.read_text(encoding="utf-8")
    in_proto = [
        (
            json.loads(key),
            "" if utf8 == "(no bytes)" else utf8.replace(" ", ""),
            digest,
            int(point_53),
            point,
        )
        for key, utf8, digest, point_53, point in _PROTO_VECTOR.findall(text)
    ]
    assert in_proto == VECTORS


@pytest.mark.parametrize(("key", "utf8", "digest", "point_53", "point"), VECTORS)
def test_vectors(key: str, utf8: str, digest: str, point_53: int, point: str) -> None:
    assert key.encode("utf-8").hex() == utf8
    assert hashlib.sha256(key.encode("utf-8")).hexdigest()[:16] == digest
    assert routing_point_53(key) == point_53
    assert f"{routing_point(key):.17g}" == point
    assert routing_point(key) == float(point)


def test_keys_are_not_normalized() -> None:
    composed, decomposed = "h\u00e9llo", "he\u0301llo"
    assert routing_point(composed) != routing_point(decomposed)


def test_points_are_exact_multiples_of_2_to_the_minus_53() -> None:
    for i in range(2_000):
        key = f"key-{i}"
        point = routing_point(key)
        assert point == math.ldexp(routing_point_53(key), -POINT_BITS)
        assert (point * 2**POINT_BITS).is_integer()
        assert int(point * 2**POINT_BITS) == routing_point_53(key)


def test_points_spread_over_the_whole_range() -> None:
    count = 10_000
    tenths = [0] * 10
    for i in range(count):
        point = routing_point(f"routing-key-{i}")
        assert 0.0 <= point < 1.0
        tenths[int(point * 10)] += 1
    assert min(tenths) >= count * 5 // 100, tenths


def test_lone_surrogates_have_no_point() -> None:
    with pytest.raises(UnicodeEncodeError):
        routing_point("\ud800")


def test_segment_index_picks_the_range_holding_the_point() -> None:
    highs = [0.25, 0.5, 0.75, 1.0]
    for key in ("", "a", "customer-7", "ü", "x" * 300):
        point = routing_point(key)
        index = segment_index(highs, key)
        low = 0.0 if index == 0 else highs[index - 1]
        assert low <= point < highs[index]
    assert segment_index([1.0], "anything") == 0


def test_segment_index_gives_the_last_segment_past_the_last_bound() -> None:
    # A bound below 1.0 (a rounding edge): keys above it go to the last segment.
    key = "customer-7"
    assert segment_index([routing_point(key) / 2, routing_point(key)], key) == 1
