"""HandleMetadata alone: compare-and-set on a real RocksDB metadata store, with rebase."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from ledger.api import LedgerState
from ledger.client.handle_metadata import HandleMetadata
from ledger.client.ledger_client import LedgerClient
from ledger.errors import BadVersionError
from tests.unit.ledger.conftest import FaultyBookie

MakeBookies = Callable[[int], list[FaultyBookie]]
MakeClient = Callable[..., LedgerClient]


async def _part(client: LedgerClient) -> HandleMetadata:
    """A part on a fresh ledger's metadata, as the store holds it."""
    handle = await client.create()
    return HandleMetadata(client, *await client.read_metadata(handle.ledger_id))


async def test_write_sets_the_change_and_keeps_the_new_version(
        make_bookies: MakeBookies, make_client: MakeClient) -> None:
    client = make_client(make_bookies(1))
    part = await _part(client)
    before = part.version
    closed = await part.write(lambda base: base.with_state(
        LedgerState.CLOSED, last_entry_id=-1, length=0))
    assert part.current == closed and closed.state is LedgerState.CLOSED
    stored, version = await client.read_metadata(closed.ledger_id)
    assert (stored, version) == (closed, part.version)
    assert version != before


async def test_a_change_by_someone_else_is_refused_and_nothing_is_adopted(
        make_bookies: MakeBookies, make_client: MakeClient) -> None:
    client = make_client(make_bookies(1))
    part = await _part(client)
    mine, version = part.current, part.version
    await client.write_metadata(mine.transition(LedgerState.IN_RECOVERY), version)
    with pytest.raises(BadVersionError):
        await part.write(lambda base: base.with_state(
            LedgerState.CLOSED, last_entry_id=-1, length=0))
    assert (part.current, part.version) == (mine, version)
    latest, _ = await part.latest()
    assert latest.state is LedgerState.IN_RECOVERY


async def test_a_swap_of_closed_fragments_is_written_on_top(
        make_bookies: MakeBookies, make_client: MakeClient) -> None:
    client = make_client(make_bookies(2))
    part = await _part(client)
    first = part.current.ensembles[0][1][0]
    other = next(bookie for bookie in ("bookie-0", "bookie-1") if bookie != first)
    await part.write(lambda base: base.with_ensemble_change(5, (other,)))
    # Auto-recovery swaps the bookie of the closed fragment [0, 5).
    swapped = replace(part.current, ensembles=((0, ("bookie-9",)), *part.current.ensembles[1:]))
    await client.write_metadata(swapped, part.version)
    closed = await part.write(lambda base: base.with_state(
        LedgerState.CLOSED, last_entry_id=4, length=50))
    assert closed.ensembles == ((0, ("bookie-9",)), (5, (other,)))
    assert closed.state is LedgerState.CLOSED
    assert (await part.latest())[0] == closed


async def test_adopt_holds_what_was_read(make_bookies: MakeBookies,
                                         make_client: MakeClient) -> None:
    client = make_client(make_bookies(1))
    part = await _part(client)
    changed = part.current.transition(LedgerState.IN_RECOVERY)
    version = await client.write_metadata(changed, part.version)
    part.adopt(*await part.latest())
    assert (part.current, part.version) == (changed, version)
