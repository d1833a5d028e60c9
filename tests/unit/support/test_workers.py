"""The groups ``make test``'s two workers take whole (tests/support/workers.py)."""

from __future__ import annotations

import pytest

from tests.support.workers import group_of


def test_a_file_is_one_group() -> None:
    assert group_of("tests/integration/test_sdk.py::test_a") == "tests/integration/test_sdk.py"
    assert group_of("tests/integration/test_sdk.py::TestX::test_b[1]") == \
        "tests/integration/test_sdk.py"


@pytest.mark.parametrize("nodeid", [
    "tests/spark/test_batch.py::test_a",
    "tests/spark/test_example.py::test_b",
    "tests/nemesis/test_nemesis.py::test_c",
    "tests/bench/test_peers_smoke.py::test_d",
])
def test_the_heaviest_files_share_one_group(nodeid: str) -> None:
    assert group_of(nodeid) == "heavy"
