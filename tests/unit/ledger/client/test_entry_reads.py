"""fetch_entries: an entry missing on the bookies that answered is lost only if all answered.

An entry can have a single copy (recovered while the other bookie of its
write set was down); while that bookie restarts, the one that answers lacks
the entry. That is a retriable BookieUnavailableError, not DataLossError
(non-retriable, which readers would give up on): found by the rolling-restart
cluster test, where a segment's load failed so until the bookie was back.
"""

from __future__ import annotations

from typing import Any

import pytest

from ledger.api import LedgerState, ReadResult
from ledger.client.entry_reads import fetch_entries
from ledger.errors import BookieUnavailableError, DataLossError
from ledger.metadata.ledger_metadata import LedgerMetadata

# E=3 Qw=2: entry 0 is on a and b.
METADATA = LedgerMetadata(ledger_id=7, ensemble_size=3, write_quorum=2, ack_quorum=2,
                          state=LedgerState.CLOSED, last_entry_id=0, length=1,
                          ensembles=((0, ("a", "b", "c")),), created_ms=0)


class _Bookie:
    def __init__(self, bookie_id: str, *, down: bool) -> None:
        self.bookie_id = bookie_id
        self.down = down

    async def read_entries(self, ledger_id: int, first: int, last: int) -> ReadResult:
        if self.down:
            raise BookieUnavailableError(f"bookie {self.bookie_id}: connection refused")
        return ReadResult([], [], [], -1, -1)  # answers, without the entry


class _Session:
    def __init__(self, down: set[str]) -> None:
        self.bookies = {b: _Bookie(b, down=b in down) for b in ("a", "b", "c")}

    def bookie(self, bookie_id: str) -> _Bookie:
        return self.bookies[bookie_id]


async def _fetch(down: set[str], rotation: int) -> None:
    session: Any = _Session(down)
    await fetch_entries(session, METADATA, 0, 0, {}, rotation)


@pytest.mark.parametrize("rotation", [0, 1])
async def test_missing_where_answered_while_a_bookie_is_away_is_retriable(rotation: int) -> None:
    with pytest.raises(BookieUnavailableError, match="the others did not") as raised:
        await _fetch({"a"}, rotation)
    assert raised.value.retriable


async def test_missing_on_every_bookie_of_its_write_set_is_data_loss() -> None:
    with pytest.raises(DataLossError, match="is on no bookie of its write set"):
        await _fetch(set(), 0)
    with pytest.raises(BookieUnavailableError, match="no bookie of entry 0's write set"):
        await _fetch({"a", "b"}, 0)
