"""Fragments a lost bookie leaves short, the in-place replacement, and the writer's rebase rule."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ledger.api import LedgerState
from ledger.autorecovery.fragments import Fragment, fragments_with, ledger_bookies, replace_bookie
from ledger.client.metadata_rebase import changed_only_closed_fragments
from ledger.errors import InvalidArgumentError
from ledger.metadata.ledger_metadata import LedgerMetadata


def _ledger(state: LedgerState = LedgerState.CLOSED, last_entry_id: int = 29) -> LedgerMetadata:
    return LedgerMetadata(
        ledger_id=7, ensemble_size=3, write_quorum=2, ack_quorum=2, state=state,
        last_entry_id=last_entry_id, length=300 if state is LedgerState.CLOSED else 0,
        ensembles=((0, ("a", "b", "c")), (10, ("a", "d", "c")), (20, ("e", "d", "c"))),
        created_ms=1)


def test_closed_ledger_every_fragment_with_the_bookie() -> None:
    metadata = _ledger()
    assert ledger_bookies(metadata) == {"a", "b", "c", "d", "e"}
    assert fragments_with(metadata, {"a"}) == [
        Fragment(0, 0, 9, ("a", "b", "c"), ("a",), closed=True),
        Fragment(1, 10, 19, ("a", "d", "c"), ("a",), closed=True),
    ]
    # The last fragment of a closed ledger ends at the ledger's end.
    assert fragments_with(metadata, {"e", "c"})[-1] == Fragment(
        2, 20, 29, ("e", "d", "c"), ("e", "c"), closed=True)
    assert fragments_with(metadata, {"z"}) == []


def test_closed_ledger_ending_before_its_last_fragment() -> None:
    # An ensemble change at entry 20, then the ledger closed at 17: the last
    # fragment holds nothing and the one before ends at the ledger's end.
    metadata = _ledger(last_entry_id=17)
    found = fragments_with(metadata, {"d"})
    assert [(f.first_entry_id, f.last_entry_id, f.entry_count) for f in found] == [
        (10, 17, 8), (20, 19, 0)]


def test_open_ledger_last_fragment_is_the_writers() -> None:
    metadata = _ledger(LedgerState.OPEN, last_entry_id=-1)
    found = fragments_with(metadata, {"c"})
    assert [(f.index, f.closed) for f in found] == [(0, True), (1, True), (2, False)]
    in_recovery = metadata.transition(LedgerState.IN_RECOVERY)
    assert [f.closed for f in fragments_with(in_recovery, {"c"})] == [False] * 3


def test_replace_bookie_in_place_even_when_closed() -> None:
    metadata = _ledger()
    swapped = replace_bookie(metadata, 1, "a", "x")
    assert swapped.ensembles == (
        (0, ("a", "b", "c")), (10, ("x", "d", "c")), (20, ("e", "d", "c")))
    assert swapped.state is LedgerState.CLOSED
    assert LedgerMetadata.from_bytes(swapped.to_bytes()) == swapped
    with pytest.raises(InvalidArgumentError, match="bookie z is not in ledger 7's ensemble"):
        replace_bookie(metadata, 0, "z", "x")
    with pytest.raises(InvalidArgumentError, match="bookie c is already in"):
        replace_bookie(metadata, 0, "a", "c")
    with pytest.raises(InvalidArgumentError, match="has no ensemble segment 3"):
        replace_bookie(metadata, 3, "a", "x")


def test_writer_rebases_only_on_closed_fragment_swaps() -> None:
    mine = _ledger(LedgerState.OPEN, last_entry_id=-1)
    recovered = replace_bookie(mine, 0, "b", "x")
    assert changed_only_closed_fragments(mine, recovered)
    assert not changed_only_closed_fragments(mine, replace_bookie(mine, 2, "e", "x"))
    assert not changed_only_closed_fragments(mine, mine.transition(LedgerState.IN_RECOVERY))
    assert not changed_only_closed_fragments(
        mine, mine.with_ensemble_change(25, ("e", "x", "c")))
    assert not changed_only_closed_fragments(mine, replace(recovered, write_quorum=1,
                                                           ack_quorum=1))
