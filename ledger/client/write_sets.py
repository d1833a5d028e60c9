"""Which bookies of an ensemble hold which entries (BookKeeper's round-robin striping).

Entry ``e`` of an ensemble of ``E`` bookies goes to positions
``e % E, (e + 1) % E, ..., (e + Qw - 1) % E``: its write set.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

__all__ = ["ensemble_span", "entries_for_position", "is_quorum_acked", "write_set"]


def write_set(entry_id: int, ensemble_size: int, write_quorum: int) -> list[int]:
    """Ensemble positions that store ``entry_id``, in preference order for reads."""
    return [(entry_id + i) % ensemble_size for i in range(write_quorum)]


def entries_for_position(
    position: int, first_entry_id: int, count: int, ensemble_size: int, write_quorum: int
) -> list[int]:
    """Indices (0-based within the run) of the run's entries that ``position`` stores."""
    if ensemble_size == write_quorum:
        return list(range(count))
    return [
        index for index in range(count)
        if (position - first_entry_id - index) % ensemble_size < write_quorum
    ]


def is_quorum_acked(
    acked: set[int], first_entry_id: int, count: int, ensemble_size: int,
    write_quorum: int, ack_quorum: int,
) -> bool:
    """Whether every entry of a run has ``ack_quorum`` acknowledgements in its write set.

    ``acked`` holds the positions that acknowledged everything of the run sent
    to them. Write sets repeat with period E, so at most E entries are checked.
    """
    if ensemble_size == write_quorum:
        return len(acked) >= ack_quorum
    for entry_id in range(first_entry_id, first_entry_id + min(count, ensemble_size)):
        positions: Sequence[int] = write_set(entry_id, ensemble_size, write_quorum)
        if sum(1 for position in positions if position in acked) < ack_quorum:
            return False
    return True


def ensemble_span(
    ensembles: Sequence[tuple[int, tuple[str, ...]]], entry_id: int
) -> tuple[int, tuple[str, ...]]:
    """The ensemble in force for ``entry_id`` and the last entry id it covers.

    ``ensembles`` are ``(first_entry_id, bookies)`` in increasing order; the
    last one covers every later entry (its last id is then ``2**63 - 1``).
    """
    index = bisect.bisect_right(ensembles, entry_id, key=lambda segment: segment[0]) - 1
    last = ensembles[index + 1][0] - 1 if index + 1 < len(ensembles) else (1 << 63) - 1
    return last, ensembles[index][1]
