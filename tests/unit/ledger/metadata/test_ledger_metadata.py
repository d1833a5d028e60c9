"""Tests of the ledger metadata record: format, state transitions, ensembles, paths."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ledger._proto.v1 import metadata_pb2
from ledger.api import NO_ENTRY, LedgerState, Versioned
from ledger.errors import InvalidArgumentError
from ledger.metadata.ledger_metadata import (
    FORMAT_VERSION,
    LedgerMetadata,
    check_transition,
    ledger_id_from_name,
    ledger_path,
)
from ledger.metadata.rocksdb_store import RocksDBMetadataStore

OPEN = LedgerState.OPEN
IN_RECOVERY = LedgerState.IN_RECOVERY
CLOSED = LedgerState.CLOSED


def make_metadata(**overrides: Any) -> LedgerMetadata:
    fields: dict[str, Any] = {
        "ledger_id": 7,
        "ensemble_size": 3,
        "write_quorum": 2,
        "ack_quorum": 2,
        "ensembles": ((0, ("b1:3181", "b2:3181", "b3:3181")),),
        "created_ms": 1_700_000_000_000,
    }
    fields.update(overrides)
    return LedgerMetadata(**fields)


def three_segments() -> LedgerMetadata:
    return (
        make_metadata()
        .with_ensemble_change(10, ["b1:3181", "b4:3181", "b3:3181"])
        .with_ensemble_change(25, ("b5:3181", "b4:3181", "b3:3181"))
    )


# -- the persisted form -----------------------------------------------------------------


def test_defaults() -> None:
    metadata = make_metadata()
    assert metadata.state is OPEN
    assert metadata.last_entry_id == NO_ENTRY
    assert metadata.length == 0
    assert dict(metadata.properties) == {}
    assert metadata.path == "/ledgers/L00000000000000000007"


def test_round_trip() -> None:
    metadata = three_segments().with_state(IN_RECOVERY).with_state(
        CLOSED, last_entry_id=41, length=4096
    )
    metadata = LedgerMetadata(
        ledger_id=2**63 - 1,
        ensemble_size=metadata.ensemble_size,
        write_quorum=metadata.write_quorum,
        ack_quorum=metadata.ack_quorum,
        state=metadata.state,
        last_entry_id=metadata.last_entry_id,
        length=metadata.length,
        ensembles=metadata.ensembles,
        created_ms=metadata.created_ms,
        properties={"segment": "topic/0", "writer": "é"},
    )
    decoded = LedgerMetadata.from_bytes(metadata.to_bytes())
    assert decoded == metadata
    assert decoded.ensembles == (
        (0, ("b1:3181", "b2:3181", "b3:3181")),
        (10, ("b1:3181", "b4:3181", "b3:3181")),
        (25, ("b5:3181", "b4:3181", "b3:3181")),
    )
    assert decoded.state is CLOSED
    assert (decoded.last_entry_id, decoded.length) == (41, 4096)
    assert dict(decoded.properties) == {"segment": "topic/0", "writer": "é"}


@pytest.mark.parametrize("state", list(LedgerState))
def test_round_trip_every_state(state: LedgerState) -> None:
    metadata = make_metadata(state=state)
    assert LedgerMetadata.from_bytes(metadata.to_bytes()).state is state


def test_record_is_versioned_protobuf() -> None:
    message = metadata_pb2.LedgerMetadata()
    message.ParseFromString(make_metadata(properties={"k": "v"}).to_bytes())
    assert message.format_version == FORMAT_VERSION == 1
    assert message.ledger_id == 7
    assert message.state == metadata_pb2.LEDGER_STATE_OPEN
    assert message.last_entry_id == -1
    assert [(s.first_entry_id, list(s.bookies)) for s in message.ensembles] == [
        (0, ["b1:3181", "b2:3181", "b3:3181"])
    ]
    assert dict(message.properties) == {"k": "v"}


def test_to_bytes_is_deterministic() -> None:
    first = make_metadata(properties={"a": "1", "b": "2", "c": "3"})
    second = make_metadata(properties={"c": "3", "b": "2", "a": "1"})
    assert first == second
    assert first.to_bytes() == second.to_bytes()


def test_unknown_format_version_is_refused() -> None:
    message = metadata_pb2.LedgerMetadata()
    message.ParseFromString(make_metadata().to_bytes())
    message.format_version = 2
    with pytest.raises(InvalidArgumentError, match="unknown format_version 2") as caught:
        LedgerMetadata.from_bytes(message.SerializeToString())
    assert caught.value.ledger_id == 7


@pytest.mark.parametrize(
    "data",
    [b"", b"\xff\xff\xff\xff", b"not a ledger metadata record at all", b"\x08"],
)
def test_garbage_is_refused(data: bytes) -> None:
    with pytest.raises(InvalidArgumentError):
        LedgerMetadata.from_bytes(data)


def test_missing_state_is_refused() -> None:
    message = metadata_pb2.LedgerMetadata()
    message.ParseFromString(make_metadata().to_bytes())
    message.state = metadata_pb2.LEDGER_STATE_UNSPECIFIED
    with pytest.raises(InvalidArgumentError, match="no valid state"):
        LedgerMetadata.from_bytes(message.SerializeToString())


def test_inconsistent_record_is_refused() -> None:
    message = metadata_pb2.LedgerMetadata()
    message.ParseFromString(make_metadata().to_bytes())
    message.write_quorum = 5
    with pytest.raises(InvalidArgumentError, match="write_quorum"):
        LedgerMetadata.from_bytes(message.SerializeToString())


def test_from_bytes_refuses_str() -> None:
    with pytest.raises(InvalidArgumentError):
        LedgerMetadata.from_bytes("text")  # type: ignore[arg-type]


async def test_stored_in_the_metadata_store(tmp_path: Path) -> None:
    metadata = make_metadata(properties={"segment": "s/1"})
    async with RocksDBMetadataStore(str(tmp_path / "metadata")) as store:
        await store.create(metadata.path, metadata.to_bytes(), make_parents=True)
        closed = metadata.with_state(CLOSED, last_entry_id=9, length=100)
        assert await store.set(metadata.path, closed.to_bytes(), 0) == 1
        versioned = await store.get(ledger_path(7))
        assert versioned == Versioned(data=closed.to_bytes(), version=1)
        assert LedgerMetadata.from_bytes(versioned.data) == closed


# -- validation -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "overrides",
    [
        {"ledger_id": -1},
        {"ledger_id": 2**63},
        {"ensemble_size": 0, "write_quorum": 0, "ack_quorum": 0, "ensembles": ((0, ()),)},
        {"write_quorum": 4},
        {"ack_quorum": 3},
        {"ack_quorum": 0},
        {"last_entry_id": -2},
        {"length": -1},
        {"created_ms": -1},
        {"state": "OPEN"},
        {"ensembles": ()},
        {"ensembles": ((1, ("a", "b", "c")),)},
        {"ensembles": ((0, ("a", "b")),)},
        {"ensembles": ((0, ("a", "a", "b")),)},
        {"ensembles": ((0, ("a", "", "b")),)},
        {"ensembles": ((0, "abc"),)},
        {"ensembles": ((0, ("a", "b", "c")), (0, ("a", "b", "d")))},
        {"ensembles": ((0, ("a", "b", "c")), (5, ("a", "b", "d")), (3, ("a", "b", "e")))},
        {"properties": {"key": 1}},
        {"ledger_id": True},
    ],
)
def test_invalid_fields_are_refused(overrides: dict[str, Any]) -> None:
    with pytest.raises(InvalidArgumentError):
        make_metadata(**overrides)


def test_is_immutable_and_hashable() -> None:
    metadata = make_metadata(properties={"k": "v"})
    with pytest.raises(AttributeError):
        metadata.state = CLOSED  # type: ignore[misc]
    with pytest.raises(TypeError):
        metadata.properties["k"] = "changed"  # type: ignore[index]
    assert hash(metadata) == hash(make_metadata(properties={"other": "x"}))
    assert len({metadata, make_metadata(properties={"k": "v"})}) == 1


def test_ensembles_are_normalised_to_tuples() -> None:
    metadata = make_metadata(ensembles=[[0, ["a", "b", "c"]]])
    assert metadata.ensembles == ((0, ("a", "b", "c")),)


# -- state transitions ------------------------------------------------------------------

EXPECTED_TRANSITIONS = {
    (OPEN, OPEN): False,
    (OPEN, IN_RECOVERY): True,
    (OPEN, CLOSED): True,
    (IN_RECOVERY, OPEN): False,
    (IN_RECOVERY, IN_RECOVERY): True,
    (IN_RECOVERY, CLOSED): True,
    (CLOSED, OPEN): False,
    (CLOSED, IN_RECOVERY): False,
    (CLOSED, CLOSED): False,
}


@pytest.mark.parametrize(("current", "new_state"), list(EXPECTED_TRANSITIONS))
def test_transitions_table(current: LedgerState, new_state: LedgerState) -> None:
    metadata = make_metadata(state=current)
    if EXPECTED_TRANSITIONS[current, new_state]:
        moved = metadata.transition(new_state)
        assert moved.state is new_state
        assert moved == make_metadata(state=new_state)
        check_transition(current, new_state)
    else:
        with pytest.raises(InvalidArgumentError) as caught:
            metadata.transition(new_state)
        message = str(caught.value)
        assert f"{current.value} -> {new_state.value}" in message
        assert caught.value.ledger_id == 7
        with pytest.raises(InvalidArgumentError):
            check_transition(current, new_state)
    assert metadata.state is current  # the original never changes


def test_refusal_names_the_allowed_states() -> None:
    with pytest.raises(InvalidArgumentError, match=r"allowed from OPEN: CLOSED, IN_RECOVERY"):
        make_metadata().transition(OPEN)
    with pytest.raises(InvalidArgumentError, match="allowed from CLOSED: none"):
        make_metadata(state=CLOSED).transition(CLOSED)


def test_with_state_records_the_end() -> None:
    metadata = make_metadata()
    closed = metadata.with_state(CLOSED, last_entry_id=99, length=12_345)
    assert (closed.state, closed.last_entry_id, closed.length) == (CLOSED, 99, 12_345)
    assert (metadata.state, metadata.last_entry_id, metadata.length) == (OPEN, NO_ENTRY, 0)
    recovering = metadata.with_state(IN_RECOVERY)
    assert (recovering.last_entry_id, recovering.length) == (NO_ENTRY, 0)
    with pytest.raises(InvalidArgumentError):
        metadata.with_state(CLOSED, last_entry_id=-5)
    with pytest.raises(InvalidArgumentError):
        closed.with_state(CLOSED, last_entry_id=100, length=1)


# -- ensembles --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("entry_id", "expected"),
    [
        (0, ("b1:3181", "b2:3181", "b3:3181")),
        (9, ("b1:3181", "b2:3181", "b3:3181")),
        (10, ("b1:3181", "b4:3181", "b3:3181")),
        (24, ("b1:3181", "b4:3181", "b3:3181")),
        (25, ("b5:3181", "b4:3181", "b3:3181")),
        (10**12, ("b5:3181", "b4:3181", "b3:3181")),
    ],
)
def test_ensemble_for_across_changes(entry_id: int, expected: tuple[str, ...]) -> None:
    assert three_segments().ensemble_for(entry_id) == expected


def test_ensemble_for_single_segment_and_negative_entry() -> None:
    metadata = make_metadata()
    assert metadata.ensemble_for(123) == ("b1:3181", "b2:3181", "b3:3181")
    with pytest.raises(InvalidArgumentError):
        metadata.ensemble_for(-1)


def test_ensemble_change_at_same_entry_replaces_last_segment() -> None:
    metadata = three_segments().with_ensemble_change(25, ["b6:3181", "b4:3181", "b3:3181"])
    assert [first for first, _ in metadata.ensembles] == [0, 10, 25]
    assert metadata.ensemble_for(30) == ("b6:3181", "b4:3181", "b3:3181")
    first_only = make_metadata().with_ensemble_change(0, ["x", "y", "z"])
    assert first_only.ensembles == ((0, ("x", "y", "z")),)


def test_ensemble_change_leaves_original_unchanged() -> None:
    metadata = make_metadata()
    changed = metadata.with_ensemble_change(5, ["b1:3181", "b9:3181", "b3:3181"])
    assert len(metadata.ensembles) == 1
    assert len(changed.ensembles) == 2
    in_recovery = metadata.with_state(IN_RECOVERY).with_ensemble_change(5, ["a", "b", "c"])
    assert in_recovery.ensemble_for(5) == ("a", "b", "c")


@pytest.mark.parametrize(
    ("first_entry_id", "bookies"),
    [
        (24, ["a", "b", "c"]),  # before the last segment's first entry
        (30, ["a", "b"]),  # wrong size
        (30, ["a", "a", "b"]),  # duplicate bookie
        (30, "abc"),  # a str, not a sequence of ids
        (-1, ["a", "b", "c"]),
    ],
)
def test_bad_ensemble_change_is_refused(first_entry_id: int, bookies: list[str]) -> None:
    with pytest.raises(InvalidArgumentError):
        three_segments().with_ensemble_change(first_entry_id, bookies)


def test_closed_ledger_ensemble_cannot_change() -> None:
    closed = make_metadata().with_state(CLOSED, last_entry_id=3, length=40)
    with pytest.raises(InvalidArgumentError, match="CLOSED"):
        closed.with_ensemble_change(4, ["a", "b", "c"])


# -- paths ------------------------------------------------------------------------------


def test_ledger_path() -> None:
    assert ledger_path(0) == "/ledgers/L00000000000000000000"
    assert ledger_path(7) == "/ledgers/L00000000000000000007"
    assert ledger_path(2**63 - 1) == "/ledgers/L09223372036854775807"
    ids = [1, 9, 10, 99, 100, 12_345_678_901, 2**63 - 1]
    names = [ledger_path(ledger_id).rsplit("/", 1)[1] for ledger_id in ids]
    assert sorted(names) == names  # string order is id order
    assert [ledger_id_from_name(name) for name in names] == ids
    with pytest.raises(InvalidArgumentError):
        ledger_path(-1)


@pytest.mark.parametrize(
    "name", ["idgen", "L", "L123", "X00000000000000000007", "L0000000000000000000x", "L" + "0" * 21]
)
def test_ledger_id_from_name_refuses_other_names(name: str) -> None:
    with pytest.raises(InvalidArgumentError):
        ledger_id_from_name(name)
