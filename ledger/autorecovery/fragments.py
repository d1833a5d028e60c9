"""Which fragments of a ledger a lost bookie leaves short of copies, and the replacement.

A *fragment* is one ensemble segment of a ledger's metadata
(``LedgerMetadata.ensembles``): the entries from its ``first_entry_id`` up to
the next segment's, striped over its bookies. A bookie that is lost for good
leaves every entry of a fragment whose write set holds its position with one
copy fewer than Qw. Re-replication copies those entries to a replacement
bookie and then swaps the replacement in, at the same position, in that
fragment only (``replace_bookie``), so write sets (computed from positions)
stay what they were.

Only *closed* fragments are re-replicated: every fragment of a CLOSED ledger,
and every fragment but the last of an OPEN one (its entries were all confirmed
before the ensemble changed). The last fragment of an OPEN ledger is its
writer's: it is still growing, and its writer replaces a failed bookie itself
on its next add (``ledger.client.handle``); a ledger IN_RECOVERY is being
closed by its new owner. Both are left for a later pass.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ledger.api import LedgerState
from ledger.errors import InvalidArgumentError
from ledger.metadata.ledger_metadata import LedgerMetadata

__all__ = ["Fragment", "fragments_with", "ledger_bookies", "replace_bookie"]


@dataclass(frozen=True, slots=True)
class Fragment:
    """One ensemble segment of a ledger holding at least one lost bookie.

    Attributes:
        index: the segment's index in ``LedgerMetadata.ensembles``.
        first_entry_id: its first entry.
        last_entry_id: its last entry (``first_entry_id - 1`` if it holds none);
            for a segment still growing, the greatest entry known so far.
        bookies: its bookies, by position.
        lost: the lost bookies in it.
        closed: whether its entries are final (it may be re-replicated now).
    """

    index: int
    first_entry_id: int
    last_entry_id: int
    bookies: tuple[str, ...]
    lost: tuple[str, ...]
    closed: bool

    @property
    def entry_count(self) -> int:
        """Entries in the fragment (0 for an empty one)."""
        return max(0, self.last_entry_id - self.first_entry_id + 1)


def ledger_bookies(metadata: LedgerMetadata) -> set[str]:
    """Every bookie named in any fragment of the ledger."""
    return {bookie for _, bookies in metadata.ensembles for bookie in bookies}


def fragments_with(metadata: LedgerMetadata, lost: set[str] | frozenset[str]) -> list[Fragment]:
    """The ledger's fragments that hold a bookie of ``lost``, in entry order."""
    found: list[Fragment] = []
    segments = metadata.ensembles
    for index, (first_entry_id, bookies) in enumerate(segments):
        gone = tuple(bookie for bookie in bookies if bookie in lost)
        if not gone:
            continue
        is_last = index == len(segments) - 1
        if is_last:
            last_entry_id = metadata.last_entry_id
        else:
            last_entry_id = segments[index + 1][0] - 1
            if metadata.state is LedgerState.CLOSED:
                last_entry_id = min(last_entry_id, metadata.last_entry_id)
        closed = metadata.state is LedgerState.CLOSED or (
            metadata.state is LedgerState.OPEN and not is_last)
        found.append(Fragment(index, first_entry_id, max(last_entry_id, first_entry_id - 1),
                              bookies, gone, closed))
    return found


def replace_bookie(metadata: LedgerMetadata, index: int, lost: str,
                   replacement: str) -> LedgerMetadata:
    """A copy where ``replacement`` takes ``lost``'s position in fragment ``index``.

    Unlike ``LedgerMetadata.with_ensemble_change`` this rewrites a fragment in
    place (it adds no segment) and works on a CLOSED ledger: the entries it
    covers are the same, only where one copy of them lives changes.

    Raises:
        InvalidArgumentError: no such fragment, ``lost`` not in it, or
            ``replacement`` already in it.
    """
    if not 0 <= index < len(metadata.ensembles):
        raise InvalidArgumentError(
            f"ledger {metadata.ledger_id} has no ensemble segment {index}",
            ledger_id=metadata.ledger_id)
    first_entry_id, bookies = metadata.ensembles[index]
    if lost not in bookies:
        raise InvalidArgumentError(
            f"bookie {lost} is not in ledger {metadata.ledger_id}'s ensemble from entry "
            f"{first_entry_id} {list(bookies)}", ledger_id=metadata.ledger_id)
    if replacement in bookies:
        raise InvalidArgumentError(
            f"bookie {replacement} is already in ledger {metadata.ledger_id}'s ensemble from "
            f"entry {first_entry_id}", ledger_id=metadata.ledger_id)
    swapped = tuple(replacement if bookie == lost else bookie for bookie in bookies)
    ensembles = (*metadata.ensembles[:index], (first_entry_id, swapped),
                 *metadata.ensembles[index + 1:])
    return replace(metadata, ensembles=ensembles)
