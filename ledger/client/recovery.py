"""Open-with-recovery: fence a ledger's bookies, agree on its end, close it.

1. Mark the ledger IN_RECOVERY by compare-and-set (a writer that tries to
   close or change its ensemble from now on loses its CAS).
2. Fence every bookie of the last ensemble. Once E - Qa + 1 have answered, no
   write set has Qa unfenced bookies left, so the old writer can get no new
   entry confirmed. Start from the greatest LAC they report.
3. Read forward from LAC + 1 with **fencing reads** (apache/bookkeeper#2614:
   a bookie that missed the fence request must be fenced by the read itself,
   or it could still accept and acknowledge an add the recovery never sees).
   An entry found on any bookie is part of the ledger; the first entry that
   Qw - Qa + 1 bookies of its write set say they lack cannot have been
   confirmed, so the ledger ends just before it.
4. Re-replicate each recovered entry to the bookies of its write set that lack
   it (recovery adds are allowed on fenced ledgers).
5. Close the ledger at the agreed end by compare-and-set. If another recoverer
   closed it first, take its result.

A crash anywhere in between leaves the ledger IN_RECOVERY with every
acknowledged entry still on its bookies, and the next recovery starts over.
Replicas on bookies that are down stay missing until they return: restoring
the replication factor is the job of an auto-recovery service, not built yet.
"""

from __future__ import annotations

import asyncio
import logging

from ledger.api import AddRequest, LedgerState, LedgerTail, ReadResult
from ledger.client.session import LedgerSession
from ledger.client.write_sets import ensemble_span, write_set
from ledger.errors import BadVersionError, LedgerError, LedgerRecoveryError, StorageError
from ledger.metadata.ledger_metadata import LedgerMetadata

__all__ = ["recover"]

log = logging.getLogger(__name__)

_READ_WINDOW = 64
_ATTEMPTS = 5


async def recover(client: LedgerSession, ledger_id: int) -> tuple[LedgerMetadata, int]:
    """Recover and close ``ledger_id``; returns its closed metadata and version."""
    for _ in range(_ATTEMPTS):
        metadata, version = await client.read_metadata(ledger_id)
        if metadata.state is LedgerState.CLOSED:
            return metadata, version
        try:
            version = await client.write_metadata(
                metadata.transition(LedgerState.IN_RECOVERY), version
            )
            end, length = await _find_end(client, metadata)
            closed = metadata.with_state(LedgerState.CLOSED, last_entry_id=end, length=length)
            version = await client.write_metadata(closed, version)
        except BadVersionError:
            log.info("ledger %d changed during recovery; starting over", ledger_id)
            continue
        log.info("recovered ledger %d: last entry %d, %d bytes", ledger_id, end, length)
        return closed, version
    raise LedgerRecoveryError(
        f"ledger {ledger_id} kept changing during recovery", ledger_id=ledger_id
    )


async def _find_end(client: LedgerSession, metadata: LedgerMetadata) -> tuple[int, int]:
    ledger_id = metadata.ledger_id
    size, write_quorum, ack_quorum = (
        metadata.ensemble_size, metadata.write_quorum, metadata.ack_quorum
    )
    segment_first, bookie_ids = metadata.ensembles[-1]
    bookies = [client.bookie(bookie_id) for bookie_id in bookie_ids]
    fenced = await asyncio.gather(
        *(bookie.fence(ledger_id) for bookie in bookies), return_exceptions=True
    )
    tails = [tail for tail in fenced if isinstance(tail, LedgerTail)]
    if len(tails) < size - ack_quorum + 1:
        # Name each bookie's failure: it is what must be fixed (a full disk, a
        # bookie down), and "could not be fenced" alone hides it.
        failures = {bookie_id: result for bookie_id, result in zip(bookie_ids, fenced, strict=True)
                    if not isinstance(result, LedgerTail)}
        if all(isinstance(cause, StorageError) for cause in failures.values()):
            raise StorageError(
                f"{next(iter(failures.values()))} (ledger {ledger_id} cannot be recovered "
                "until it takes writes again)", ledger_id=ledger_id)
        raise LedgerRecoveryError(
            f"ledger {ledger_id}: only {len(tails)} of {size} bookies could be fenced, "
            f"{size - ack_quorum + 1} needed; "
            + "; ".join(str(cause) if bookie_id in str(cause) else f"bookie {bookie_id}: {cause}"
                        for bookie_id, cause in failures.items()),
            ledger_id=ledger_id,
        )
    # Entries before the last ensemble were confirmed when it was installed.
    start = max([segment_first - 1, *(tail.last_add_confirmed for tail in tails)])
    recovered: dict[int, tuple[int, bytes]] = {}
    lacking: dict[int, list[int]] = {}
    absent_needed = write_quorum - ack_quorum + 1
    cursor = start + 1
    end: int | None = None
    while end is None:
        high = cursor + _READ_WINDOW - 1
        replies = await asyncio.gather(
            *(bookie.read_entries(ledger_id, cursor, high, fence=True) for bookie in bookies),
            return_exceptions=True,
        )
        held: list[dict[int, tuple[int, bytes]] | None] = []
        covered: list[int] = []  # per position: ids up to here are known held or absent
        for reply in replies:
            if isinstance(reply, ReadResult):
                held.append({
                    entry_id: (length, data) for entry_id, length, data
                    in zip(reply.entry_ids, reply.lengths, reply.datas, strict=True)
                })
                cut = reply.entry_ids[-1] if reply.entry_ids else high
                covered.append(high if reply.last_entry_id <= cut else cut)
            elif isinstance(reply, LedgerError):
                held.append(None)
                covered.append(cursor - 1)
            else:
                raise reply
        for entry_id in range(cursor, high + 1):
            positions = write_set(entry_id, size, write_quorum)
            copies = [held[p][entry_id] for p in positions  # type: ignore[index]
                      if held[p] is not None and entry_id in held[p]]  # type: ignore[operator]
            if copies:
                recovered[entry_id] = copies[0]
                lacking[entry_id] = [
                    p for p in positions
                    if held[p] is not None and entry_id not in held[p]  # type: ignore[operator]
                    and covered[p] >= entry_id
                ]
                cursor = entry_id + 1
                continue
            absent = sum(1 for p in positions if held[p] is not None and covered[p] >= entry_id)
            if absent >= absent_needed:
                end = entry_id - 1
            elif any(held[p] is not None and covered[p] < entry_id for p in positions):
                cursor = entry_id  # a reply was cut short: read on from here
            else:
                raise LedgerRecoveryError(
                    f"ledger {ledger_id}: cannot decide whether entry {entry_id} exists "
                    f"({absent} of {absent_needed} needed bookies answered)", ledger_id=ledger_id,
                )
            break
    await _rereplicate(client, metadata, bookie_ids, recovered, lacking, end)
    if end in recovered:
        return end, recovered[end][0]
    return end, await _length_at(client, metadata, end)


async def _rereplicate(
    client: LedgerSession, metadata: LedgerMetadata, bookie_ids: tuple[str, ...],
    recovered: dict[int, tuple[int, bytes]], lacking: dict[int, list[int]], end: int,
) -> None:
    per_position: dict[int, list[int]] = {}
    for entry_id, positions in lacking.items():
        for position in positions:
            per_position.setdefault(position, []).append(entry_id)
    adds = []
    for position, entry_ids in per_position.items():
        request = AddRequest(
            metadata.ledger_id, entry_ids, [recovered[e][0] for e in entry_ids],
            [recovered[e][1] for e in entry_ids], end, recovery=True,
        )
        adds.append(client.bookie(bookie_ids[position]).add_entries(request))
    if adds:
        log.info("ledger %d: re-replicating %d entries", metadata.ledger_id,
                 sum(len(v) for v in per_position.values()))
        await asyncio.gather(*adds)


async def _length_at(client: LedgerSession, metadata: LedgerMetadata, entry_id: int) -> int:
    if entry_id < 0:
        return 0
    _, bookie_ids = ensemble_span(metadata.ensembles, entry_id)
    errors: list[str] = []
    for position in write_set(entry_id, metadata.ensemble_size, metadata.write_quorum):
        try:
            reply = await client.bookie(bookie_ids[position]).read_entries(
                metadata.ledger_id, entry_id, entry_id
            )
        except LedgerError as error:
            errors.append(str(error))
            continue
        if reply.entry_ids and reply.entry_ids[0] == entry_id:
            return reply.lengths[0]
    raise LedgerRecoveryError(
        f"ledger {metadata.ledger_id}: entry {entry_id} unreadable ({errors})",
        ledger_id=metadata.ledger_id,
    )
