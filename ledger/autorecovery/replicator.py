"""Re-replicate one ledger: copy a lost bookie's entries to a replacement, then swap it in.

For each closed fragment (``fragments``) that names a lost bookie:

1. choose a replacement among the live bookies not in that fragment;
2. for every entry of the fragment whose write set holds the lost bookie's
   position, read it from another bookie of its write set and write it to the
   replacement with a *recovery add* (accepted on a fenced ledger, which a
   closed ledger is), a window of entries per request;
3. once every fragment is copied, write the metadata with the replacements
   by compare-and-set on the version read at the start.

Crash windows: a worker that dies before step 3 has changed no metadata; its
mark stays and another worker starts over (it may choose another replacement).
The copies already made then sit on a bookie no metadata names: they cost
space, never correctness, and stay there (deleting a ledger asks only the
bookies its metadata names) unless that bookie runs its garbage collector with
``--gc-over-replicated`` (``ledger.bookie.collector``), which drops them once
the ledger is no longer marked. A failed compare-and-set (the writer of an open
ledger changed its ensemble, a recovery closed the ledger, another worker
finished first) changes nothing either, and the ledger is tried again later
from fresh metadata. Copying is idempotent, so doing it twice is harmless.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass

from ledger import metrics
from ledger.api import AddRequest, LedgerState, MetadataStore
from ledger.autorecovery.fragments import Fragment, fragments_with, replace_bookie
from ledger.client.directory import BookieDirectory
from ledger.client.write_sets import write_set
from ledger.errors import BadVersionError, DataLossError, LedgerError, NoNodeError
from ledger.metadata.ledger_metadata import LedgerMetadata, ledger_path

__all__ = ["COPY_WINDOW_ENTRIES", "ReplicationResult", "replicate_ledger"]

log = logging.getLogger(__name__)

#: Entries read and written per request while copying (bounds the memory a
#: copy holds: at most this many entries of at most ``max_entry_bytes`` each).
COPY_WINDOW_ENTRIES = 32


@dataclass(frozen=True, slots=True)
class ReplicationResult:
    """What one pass over a ledger achieved.

    Attributes:
        done: every fragment naming a lost bookie was replaced (or the ledger
            is gone): the mark may be cleared.
        entries: entries copied to replacements.
        data_bytes: bytes of them.
        left: why the ledger is not done (empty when done).
    """

    done: bool
    entries: int = 0
    data_bytes: int = 0
    left: str = ""


async def replicate_ledger(store: MetadataStore, bookies: BookieDirectory, ledger_id: int,
                           lost: set[str] | frozenset[str],
                           live: Sequence[str]) -> ReplicationResult:
    """Re-replicate the closed fragments of ``ledger_id`` that name a bookie of ``lost``.

    Args:
        store: the cluster's metadata store.
        bookies: reaches any bookie by id (``BookieDirectory(connect=...)``).
        ledger_id: the ledger.
        lost: bookies lost for good (never chosen, never read from).
        live: bookies that may take copies.

    Raises:
        LedgerError: a bookie or the store failed (try again later);
            ``DataLossError`` when an entry is on no surviving bookie.
    """
    path = ledger_path(ledger_id)
    try:
        node = await store.get(path)
    except NoNodeError:
        return ReplicationResult(done=True)  # deleted: nothing to restore
    metadata = LedgerMetadata.from_bytes(node.data)
    if metadata.state is LedgerState.IN_RECOVERY:
        return ReplicationResult(done=False, left="in recovery (its new owner closes it)")
    updated, entries, data_bytes, left = metadata, 0, 0, []
    for fragment in fragments_with(metadata, lost):
        if not fragment.closed:
            left.append(f"the open ensemble from entry {fragment.first_entry_id} is its "
                        "writer's to change")
            continue
        for bookie in fragment.lost:
            current = updated.ensembles[fragment.index][1]
            candidates = [b for b in live if b not in current and b not in lost]
            if not candidates:
                left.append(f"no live bookie outside {list(current)} to replace {bookie}")
                continue
            replacement = random.choice(candidates)
            copied, copied_bytes = await _copy(bookies, metadata, fragment,
                                               current.index(bookie), replacement, lost)
            entries += copied
            data_bytes += copied_bytes
            updated = replace_bookie(updated, fragment.index, bookie, replacement)
            log.info("ledger %d: %d entries from entry %d copied to %s in place of lost "
                     "bookie %s", ledger_id, copied, fragment.first_entry_id, replacement,
                     bookie)
    if updated is not metadata:
        try:
            await store.set(path, updated.to_bytes(), node.version)
        except (BadVersionError, NoNodeError):
            return ReplicationResult(done=False, entries=entries, data_bytes=data_bytes,
                                     left="its metadata changed meanwhile")
        metrics.observe_rereplicated(entries, data_bytes)
    return ReplicationResult(done=not left, entries=entries, data_bytes=data_bytes,
                             left="; ".join(left))


async def _copy(bookies: BookieDirectory, metadata: LedgerMetadata, fragment: Fragment,
                position: int, replacement: str,
                lost: set[str] | frozenset[str]) -> tuple[int, int]:
    size, write_quorum = metadata.ensemble_size, metadata.write_quorum
    target = bookies.bookie(replacement)
    copied = copied_bytes = 0
    last = fragment.last_entry_id
    for low in range(fragment.first_entry_id, last + 1, COPY_WINDOW_ENTRIES):
        high = min(last, low + COPY_WINDOW_ENTRIES - 1)
        needed = [e for e in range(low, high + 1) if position in write_set(e, size, write_quorum)]
        if not needed:
            continue
        found = await _read_window(bookies, metadata, fragment, position, needed, lost)
        missing = [e for e in needed if e not in found]
        if missing:
            raise DataLossError(
                f"ledger {metadata.ledger_id}: entries {missing[:10]} are on no surviving "
                f"bookie of their write sets in {list(fragment.bookies)}",
                ledger_id=metadata.ledger_id)
        await target.add_entries(AddRequest(
            metadata.ledger_id, needed, [found[e][0] for e in needed],
            [found[e][1] for e in needed], last, recovery=True))
        copied += len(needed)
        copied_bytes += sum(len(found[e][1]) for e in needed)
    return copied, copied_bytes


async def _read_window(bookies: BookieDirectory, metadata: LedgerMetadata, fragment: Fragment,
                       position: int, needed: list[int],
                       lost: set[str] | frozenset[str]) -> dict[int, tuple[int, bytes]]:
    """``needed`` entries (length, data) from the other bookies of their write sets."""
    size, write_quorum = metadata.ensemble_size, metadata.write_quorum
    found: dict[int, tuple[int, bytes]] = {}
    for source in range(size):
        source_id = fragment.bookies[source]
        if source == position or source_id in lost:
            continue
        wanted = {e for e in needed
                  if e not in found and source in write_set(e, size, write_quorum)}
        if not wanted:
            continue
        cursor, high = min(wanted), max(wanted)
        try:
            while cursor <= high:
                reply = await bookies.bookie(source_id).read_entries(
                    metadata.ledger_id, cursor, high)
                if not reply.entry_ids:
                    break
                for entry_id, length, data in zip(reply.entry_ids, reply.lengths, reply.datas,
                                                  strict=True):
                    if entry_id in wanted:
                        found.setdefault(entry_id, (length, data))
                cursor = reply.entry_ids[-1] + 1
        except LedgerError as error:
            # Another bookie of the write set may hold them: read on, judge at the end.
            log.info("ledger %d: cannot read entries %d..%d from %s: %s",
                     metadata.ledger_id, cursor, high, source_id, error)
    return found
