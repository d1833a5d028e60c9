"""The broker's routing-key hash gives the proto's test vectors, as the SDK's does."""

from __future__ import annotations

import pytest

from broker.topics.routing import routing_point, segment_for_key
from folio.api.v1.routing import routing_point as sdk_routing_point

VECTORS = [
    ("", 0.88941599489133727),
    ("a", 0.79137427052238152),
    ("user-1", 0.77640592414410037),
    ("héllo", 0.23547894450624629),
    ("日本", 0.80924600650531575),
]


@pytest.mark.parametrize(("key", "point"), VECTORS)
def test_proto_vectors(key: str, point: float) -> None:
    assert routing_point(key) == point
    assert sdk_routing_point(key) == point


def test_segment_for_key_uses_half_open_ranges() -> None:
    lows = [0.0, 0.25, 0.5, 0.75]
    assert segment_for_key(lows, "héllo") == 0  # 0.235...
    assert segment_for_key(lows, "a") == 3  # 0.791...
    assert segment_for_key([0.0], "anything") == 0
