"""The ledger's JSON records in the one framing (ledger/records.py), and as earlier builds wrote.

Each ``EARLIER`` value is the exact bytes the build before the shared framing
wrote (``json.dumps(..., sort_keys=True)``, with spaces); they must still load.
"""

from __future__ import annotations

import json

import pytest

from broker.cluster.layout import ClusterLayout
from ledger.autorecovery.marks import Mark
from ledger.errors import MetadataError
from ledger.metadata.cluster_layout import Registration
from ledger.records import VERSION_KEY

EARLIER_LAYOUT = (b'{"ack_quorum": 2, "container_count": 8, "ensemble_size": 3, '
                  b'"format_version": 1, "write_quorum": 2}')
EARLIER_REGISTRATION = (b'{"address": "h:1", "format_version": 1, "started_at_ms": 5, '
                        b'"version": "0.1.0"}')
EARLIER_MARK = b'{"format_version": 1, "lost_bookies": ["a:1", "b:2"], "marked_at_ms": 9}'


def test_records_of_earlier_builds_still_load() -> None:
    assert ClusterLayout.decode(EARLIER_LAYOUT) == ClusterLayout(container_count=8)
    assert Registration.decode("/brokers/h:1", EARLIER_REGISTRATION) == Registration(
        address="h:1", started_at_ms=5, version="0.1.0")
    assert Mark.decode(7, EARLIER_MARK, 3) == Mark(7, frozenset({"a:1", "b:2"}), 9, 3)


def test_records_are_written_in_the_one_framing_and_read_back() -> None:
    layout = ClusterLayout(container_count=8)
    registration = Registration(address="h:1", started_at_ms=5, version="0.1.0")
    mark = Mark(7, frozenset({"a:1", "b:2"}), 9, 3)
    for data in (layout.encode(), registration.encode(), mark.encode()):
        assert json.loads(data)[VERSION_KEY] == 1
        assert b" " not in data  # compact, as dump_record writes
    assert ClusterLayout.decode(layout.encode()) == layout
    assert Registration.decode("/brokers/h:1", registration.encode()) == registration
    assert Mark.decode(7, mark.encode(), 3) == mark


@pytest.mark.parametrize(("data", "problem"), [
    (b"\xff", "not a JSON record"),
    (b'{"lost_bookies": [], "marked_at_ms": 1}', "unknown format version None"),
    (b'{"format_version": 2, "lost_bookies": [], "marked_at_ms": 1}',
     "unknown format version 2"),
])
def test_an_unreadable_mark_is_a_metadata_error(data: bytes, problem: str) -> None:
    with pytest.raises(MetadataError, match=f"mark of ledger 7 .*{problem}|{problem}"):
        Mark.decode(7, data, 1)
