"""Reading entries from the bookies of their write sets, for ``LedgerHandle.read``.

Each entry is read from a bookie of its write set, starting at a rotating
position (spreading reads over the copies) and trying the next one when a
bookie fails or lacks it. One request covers the run of entries up to the end
of the ensemble segment in force, so a bookie answers as many as it holds.
"""

from __future__ import annotations

from ledger.client.session import LedgerSession
from ledger.client.write_sets import ensemble_span, write_set
from ledger.errors import BookieUnavailableError, DataLossError, NoSuchLedgerError
from ledger.metadata.ledger_metadata import LedgerMetadata

__all__ = ["fetch_entries"]


async def fetch_entries(client: LedgerSession, metadata: LedgerMetadata, cursor: int,
                        last_entry_id: int, found: dict[int, bytes], rotation: int) -> None:
    """Put entry ``cursor`` (and what else the answering bookie holds up to
    ``last_entry_id`` in the same ensemble segment) into ``found``.

    Raises:
        BookieUnavailableError: no bookie of the entry's write set answered.
        DataLossError: those that answered do not hold it.
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
    raise DataLossError(
        f"entry {cursor} of ledger {ledger_id} is on no bookie of its write set "
        f"{[bookie_ids[p] for p in positions]}", ledger_id=ledger_id,
    )
