"""Reading entries from the bookies of their write sets, for ``LedgerHandle.read``; and
the error of a writer that finds no bookie to replace a failed one with.

Each entry is read from a bookie of its write set, starting at a rotating
position (spreading reads over the copies) and trying the next one when a
bookie fails or lacks it. One request covers the run of entries up to the end
of the ensemble segment in force, so a bookie answers as many as it holds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ledger.client.session import LedgerSession
from ledger.client.write_sets import ensemble_span, write_set
from ledger.errors import (
    BookieUnavailableError,
    DataLossError,
    LedgerError,
    NoSuchLedgerError,
    NotEnoughBookiesError,
    StorageError,
)
from ledger.metadata.ledger_metadata import LedgerMetadata

__all__ = ["fetch_entries", "no_replacement_error"]


async def fetch_entries(client: LedgerSession, metadata: LedgerMetadata, cursor: int,
                        last_entry_id: int, found: dict[int, bytes], rotation: int) -> None:
    """Put entry ``cursor`` (and what else the answering bookie holds up to
    ``last_entry_id`` in the same ensemble segment) into ``found``.

    Raises:
        BookieUnavailableError: a bookie of the entry's write set did not
            answer, and those that did do not hold it.
        DataLossError: every bookie of its write set answered without it.
    """
    ledger_id = metadata.ledger_id
    segment_last, bookie_ids = ensemble_span(metadata.ensembles, cursor)
    high = min(last_entry_id, segment_last)
    positions = write_set(cursor, metadata.ensemble_size, metadata.write_quorum)
    start = rotation % len(positions)
    unavailable: list[str] = []
    for position in positions[start:] + positions[:start]:
        bookie = client.bookie(bookie_ids[position])
        try:
            result = await bookie.read_entries(ledger_id, cursor, high)
        except (BookieUnavailableError, NoSuchLedgerError) as error:
            unavailable.append(f"{bookie.bookie_id}: {error}")
            continue
        for entry_id, data in zip(result.entry_ids, result.datas, strict=True):
            if entry_id <= high:
                found[entry_id] = data
        if cursor in found:
            return
    if len(unavailable) == len(positions):
        raise BookieUnavailableError(
            f"no bookie of entry {cursor}'s write set answered: {unavailable}",
            ledger_id=ledger_id,
        )
    if unavailable:
        # Not lost while a bookie that may hold it is away: an entry can have
        # one copy only (recovered while the other bookie of its write set was
        # down), and that bookie may be restarting. Retriable.
        raise BookieUnavailableError(
            f"entry {cursor} of ledger {ledger_id} is not on the bookies of its write set "
            f"that answered; the others did not: {unavailable}", ledger_id=ledger_id,
        )
    raise DataLossError(
        f"entry {cursor} of ledger {ledger_id} is on no bookie of its write set "
        f"{[bookie_ids[p] for p in positions]}", ledger_id=ledger_id,
    )


def no_replacement_error(ledger_id: int, current: Sequence[str], positions: Sequence[int],
                         bookie_errors: Mapping[int, LedgerError]) -> LedgerError:
    """Why a writer could not replace the bookies at ``positions`` (nothing to choose from).

    Names each bookie's failure: it is what the operator must fix (a full disk, a
    bookie down). All storage failures: ``StorageError``; else ``NotEnoughBookiesError``.
    """
    causes = {current[p]: bookie_errors.get(p) for p in positions}
    storage = [cause for cause in causes.values() if isinstance(cause, StorageError)]
    if len(storage) == len(causes):
        return StorageError(f"{storage[0]} (ledger {ledger_id}: no other bookie to write to)",
                            ledger_id=ledger_id)
    return NotEnoughBookiesError(
        f"no bookie left to replace {list(causes)} in ledger {ledger_id}; "
        + "; ".join(str(cause) if bookie_id in str(cause) else f"bookie {bookie_id} failed: {cause}"
                    for bookie_id, cause in causes.items()),
        ledger_id=ledger_id,
    )
