"""The cluster layout record (moved from tests/unit/ledger/metadata/test_cluster_layout.py)."""

from __future__ import annotations

import json

import pytest

from broker.cluster.layout import ClusterLayout
from ledger.errors import MetadataError


def test_layout_round_trip_and_differences() -> None:
    layout = ClusterLayout(container_count=8, ensemble_size=3, write_quorum=3, ack_quorum=2)
    assert json.loads(layout.encode()) == {
        "format_version": 1, "container_count": 8, "ensemble_size": 3, "write_quorum": 3,
        "ack_quorum": 2}
    assert ClusterLayout.decode(layout.encode()) == layout
    assert layout.differences(layout) == []
    assert ClusterLayout().differences(layout) == [
        "container_count: 16 != 8", "write_quorum: 2 != 3"]


@pytest.mark.parametrize("fields", [
    {"container_count": 0}, {"container_count": 65537},
    {"ensemble_size": 2, "write_quorum": 3}, {"ack_quorum": 0},
])
def test_bad_layouts_are_refused(fields: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        ClusterLayout(**fields)


@pytest.mark.parametrize(("data", "problem"), [
    (b"\xff", "not a JSON record"),
    (b"[1]", "not a JSON object"),
    (b'{"format_version": 2}', "unknown format version 2"),
    (b'{"format_version": 1, "container_count": 4}', "bad layout record"),
])
def test_bad_layout_records(data: bytes, problem: str) -> None:
    with pytest.raises(MetadataError, match=problem):
        ClusterLayout.decode(data)
