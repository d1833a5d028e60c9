"""The one framing of persisted JSON records (ledger/records.py): written, read, refused."""

from __future__ import annotations

import pytest

from ledger.records import VERSION_KEY, RecordFormatError, dump_record, load_record


def test_a_record_is_compact_sorted_json_with_its_version() -> None:
    data = dump_record(3, {"b": [1, 2], "a": "x"})
    assert data == b'{"a":"x","b":[1,2],"format_version":3}'
    assert load_record(data, "thing", (3,)) == {"a": "x", "b": [1, 2], VERSION_KEY: 3}
    with pytest.raises(ValueError, match="format_version"):
        dump_record(1, {VERSION_KEY: 2})


def test_a_record_for_earlier_readers_carries_their_key_too() -> None:
    data = dump_record(1, {"x": 2}, legacy_key="v")
    assert data == b'{"format_version":1,"v":1,"x":2}'
    assert load_record(data, "thing", (1,), legacy_key="v") == {"x": 2, VERSION_KEY: 1}
    with pytest.raises(ValueError, match="'v'"):
        dump_record(1, {"v": 2}, legacy_key="v")


def test_an_earlier_builds_key_still_reads_and_is_renamed() -> None:
    assert load_record(b'{"v": 1, "x": 2}', "thing", (1,), legacy_key="v") \
        == {"x": 2, VERSION_KEY: 1}
    # format_version wins over the legacy key, which is dropped either way.
    assert load_record(b'{"format_version": 1, "version": 2}', "thing", (1,),
                       legacy_key="version") == {VERSION_KEY: 1}
    assert load_record(b'{"x": 2}', "thing", (1,), unversioned=1) == {"x": 2, VERSION_KEY: 1}


@pytest.mark.parametrize(("data", "problem"), [
    (b"\xff", "thing is not a JSON record"),
    (b"{", "thing is not a JSON record"),
    (b"[1]", "thing is not a JSON object but a list"),
    (b'{"format_version": 2}', r"thing has unknown format version 2 \(this build reads 1\)"),
    (b'{"format_version": true}', "unknown format version True"),
    (b'{"x": 1}', "unknown format version None"),
    (b'{"v": 1}', "unknown format version None"),
])
def test_unreadable_records_are_refused_with_why(data: bytes, problem: str) -> None:
    with pytest.raises(RecordFormatError, match=problem) as raised:
        load_record(data, "thing", (1,))
    assert raised.value.what == "thing"
    assert isinstance(raised.value, ValueError)


def test_the_error_names_the_version_found() -> None:
    with pytest.raises(RecordFormatError) as raised:
        load_record(b'{"v": 2}', "thing", (1,), legacy_key="v")
    assert raised.value.version == 2
    with pytest.raises(RecordFormatError) as raised:
        load_record(b"[]", "thing", (1,))
    assert raised.value.version is None
