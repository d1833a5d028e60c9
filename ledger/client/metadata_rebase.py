"""Whether a writer may redo its metadata change on a version changed by auto-recovery.

A ledger's writer changes its metadata by compare-and-set (ensemble change,
close); a lost compare-and-set used to mean that a recovery took the ledger.
Auto-recovery (``ledger.autorecovery``) may also rewrite an OPEN ledger's
metadata, but only its *closed* fragments (every ensemble segment but the
last), swapping a lost bookie for a replacement holding the same entries.
Such a change leaves everything the writer owns as it was: the state (OPEN),
the last segment, the quorums, the end. The writer then takes the new
version and applies its own change on top (BookKeeper's writers merge such
changes too). Anything else (IN_RECOVERY, CLOSED, another last segment) is
someone else's ledger now.
"""

from __future__ import annotations

from dataclasses import replace

from ledger.api import LedgerState
from ledger.metadata.ledger_metadata import LedgerMetadata

__all__ = ["changed_only_closed_fragments"]


def changed_only_closed_fragments(mine: LedgerMetadata, latest: LedgerMetadata) -> bool:
    """Whether ``latest`` differs from ``mine`` only in bookies of segments before the last."""
    if latest.state is not LedgerState.OPEN or mine.state is not LedgerState.OPEN:
        return False
    if len(latest.ensembles) != len(mine.ensembles) or latest.ensembles[-1] != mine.ensembles[-1]:
        return False
    if any(theirs[0] != ours[0] for theirs, ours in zip(latest.ensembles, mine.ensembles,
                                                         strict=True)):
        return False
    return replace(latest, ensembles=mine.ensembles) == mine
