"""SegmentLife alone: the residence table, the seal stages, failures and the errors per state."""

from __future__ import annotations

import pytest

from broker.errors import (
    BrokerShuttingDownError,
    NoSuchSegmentError,
    SegmentSealedError,
    WrongHostError,
)
from broker.segments.life import (
    RESIDENCE_MOVES,
    Residence,
    ResidenceEvent,
    SealStage,
    SegmentLife,
    SegmentLifeError,
)
from ledger.errors import LedgerError, LedgerFencedError, MetadataUnavailableError

NAME = "orders/3"


def _at(residence: Residence) -> SegmentLife:
    """A life moved to ``residence`` through the table's own moves."""
    life = SegmentLife(NAME, sealed=False)
    path = {
        Residence.OPEN: [],
        Residence.CLOSING: [ResidenceEvent.CLOSE],
        Residence.HANDING_OVER: [ResidenceEvent.HAND_OVER],
        Residence.CLOSED: [ResidenceEvent.CLOSE, ResidenceEvent.CLOSED],
        Residence.MOVED: [ResidenceEvent.ABANDON],
        Residence.DELETED: [ResidenceEvent.DELETE],
    }[residence]
    for event in path:
        life.move(event)
    assert life.residence is residence
    return life


@pytest.mark.parametrize("residence", list(Residence))
@pytest.mark.parametrize("event", list(ResidenceEvent))
def test_every_move_follows_the_table_or_raises(residence: Residence,
                                                event: ResidenceEvent) -> None:
    life = _at(residence)
    after = RESIDENCE_MOVES.get((residence, event))
    if after is None:
        with pytest.raises(SegmentLifeError, match="no move"):
            life.move(event)
        assert life.residence is residence  # a bad move changes nothing
    else:
        assert life.move(event) is after
        assert life.residence is after


def test_a_graceful_close_and_a_hand_over_begin_only_when_open() -> None:
    for residence in Residence:
        for event in (ResidenceEvent.CLOSE, ResidenceEvent.HAND_OVER):
            assert ((residence, event) in RESIDENCE_MOVES) is (residence is Residence.OPEN)


def test_deleted_is_the_end() -> None:
    for event in ResidenceEvent:
        after = RESIDENCE_MOVES.get((Residence.DELETED, event))
        assert after in (None, Residence.DELETED)


def test_a_close_that_finishes_after_the_segment_was_lost_leaves_it_moved() -> None:
    life = _at(Residence.CLOSING)
    life.move(ResidenceEvent.ABANDON)
    life.move(ResidenceEvent.CLOSED)
    assert life.residence is Residence.MOVED
    with pytest.raises(WrongHostError):
        life.check_readable()


@pytest.mark.parametrize(("residence", "error"), [
    (Residence.CLOSING, BrokerShuttingDownError),
    (Residence.CLOSED, BrokerShuttingDownError),
    (Residence.HANDING_OVER, WrongHostError),
    (Residence.MOVED, WrongHostError),
    (Residence.DELETED, NoSuchSegmentError),
])
def test_each_residence_but_open_refuses_reads_with_its_error(
        residence: Residence, error: type[Exception]) -> None:
    life = _at(residence)
    with pytest.raises(error):
        life.check_readable()
    with pytest.raises(error):
        life.check_appendable(7)
    assert not life.usable


def test_open_takes_reads_and_appends() -> None:
    life = SegmentLife(NAME, sealed=False)
    life.check_readable()
    life.check_appendable(7)
    assert life.usable and life.is_open and not life.sealed and not life.end_final


def test_the_seal_goes_forward_only_and_refuses_appends_from_its_first_stage() -> None:
    life = SegmentLife(NAME, sealed=False)
    with pytest.raises(SegmentLifeError, match="seal cannot go"):
        life.advance_seal(SealStage.SEALED)  # not before SEALING
    life.advance_seal(SealStage.SEALING)
    assert life.sealed and not life.end_final
    with pytest.raises(SegmentSealedError) as refused:
        life.check_appendable(42)
    assert refused.value.end_offset == 42
    life.check_readable()  # a sealed segment is still read
    life.advance_seal(SealStage.SEALED)
    assert life.sealed and life.end_final and life.usable
    for stage in SealStage:
        with pytest.raises(SegmentLifeError):
            life.advance_seal(stage)
    assert life.seal_stage is SealStage.SEALED


def test_a_record_loaded_sealed_starts_sealed_and_final() -> None:
    life = SegmentLife(NAME, sealed=True)
    assert life.seal_stage is SealStage.SEALED and life.end_final


def test_the_first_failure_stays_and_fails_appends_not_reads() -> None:
    life = SegmentLife(NAME, sealed=False)
    first = LedgerError("bookie gone")
    life.fail(first)
    life.fail(MetadataUnavailableError("later"))
    assert life.failure is first and not life.usable
    life.check_readable()  # read until the owner loads it again
    with pytest.raises(LedgerError, match="bookie gone"):
        life.check_appendable(0)


def test_a_fenced_ledger_fails_wrong_host_with_a_fresh_error_each_time() -> None:
    life = SegmentLife(NAME, sealed=False)
    life.fail(LedgerFencedError("fenced"))
    assert isinstance(life.failure, WrongHostError)
    first, second = life.failure_error(), life.failure_error()
    assert isinstance(first, WrongHostError) and first is not second


def test_a_taken_record_wins_over_an_earlier_failure() -> None:
    life = SegmentLife(NAME, sealed=False)
    life.fail(LedgerError("bookie gone"))
    assert isinstance(life.taken(), WrongHostError)
    assert isinstance(life.failure, WrongHostError)
    with pytest.raises(WrongHostError):
        life.check_appendable(0)


def test_a_base_exception_is_kept_as_a_ledger_error() -> None:
    life = SegmentLife(NAME, sealed=False)
    life.fail(KeyboardInterrupt("stop"))
    assert isinstance(life.failure, LedgerError)


def test_the_residence_error_comes_before_the_seal_and_the_failure() -> None:
    life = SegmentLife(NAME, sealed=True)
    life.fail(LedgerError("bookie gone"))
    life.move(ResidenceEvent.ABANDON)
    with pytest.raises(WrongHostError):
        life.check_appendable(0)
