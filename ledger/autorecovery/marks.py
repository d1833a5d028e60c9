"""Under-replication marks in the metadata store: what is left to re-replicate, and who does it.

Paths (named in ``ledger.metadata.paths``)::

    /autorecovery/auditor                ephemeral: the id of the worker that audits
    /autorecovery/underreplicated/L<id>  persistent: ledger <id> lacks copies (JSON,
                                         format 1: the lost bookies it holds, when marked)
    /autorecovery/locks/L<id>            ephemeral: the worker re-replicating ledger <id>

A mark is persistent so that the work survives any worker's crash; a lock is
ephemeral so that a crashed worker's claim vanishes with its session and
another worker takes the ledger up. The auditor adds lost bookies to a mark
by compare-and-set; a worker deletes a mark only at the version it read
before it re-replicated, so a bookie lost meanwhile is never dropped.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass

from ledger.api import MetadataStore
from ledger.errors import (
    BadVersionError,
    MetadataError,
    MetadataUnavailableError,
    NodeExistsError,
    NoNodeError,
)
from ledger.metadata.ledger_metadata import ledger_id_from_name, ledger_path
from ledger.metadata.paths import (
    AUDITOR_PATH,
    AUTORECOVERY_PATH,
    LOCKS_PATH,
    UNDER_REPLICATED_PATH,
)
from ledger.metadata.read_back import landed
from ledger.records import RecordFormatError, dump_record, load_record

__all__ = [
    "AUDITOR_PATH",
    "AUTORECOVERY_PATH",
    "LOCKS_PATH",
    "MARK_FORMAT_VERSION",
    "UNDER_REPLICATED_PATH",
    "Mark",
    "UnderReplicationMarks",
]

MARK_FORMAT_VERSION = 1


def _name(ledger_id: int) -> str:
    # The same zero-padded name as the ledger's own node, so marks sort by ledger id.
    return ledger_path(ledger_id).rsplit("/", 1)[1]


@dataclass(frozen=True, slots=True)
class Mark:
    """One under-replicated ledger.

    Attributes:
        ledger_id: the ledger.
        lost_bookies: the lost bookies its ensembles name.
        marked_at_ms: when it was first marked (wall clock).
        version: the mark node's version (for the delete).
    """

    ledger_id: int
    lost_bookies: frozenset[str]
    marked_at_ms: int
    version: int

    def encode(self) -> bytes:
        """The node's data."""
        return dump_record(MARK_FORMAT_VERSION, {"lost_bookies": sorted(self.lost_bookies),
                                                 "marked_at_ms": self.marked_at_ms})

    @classmethod
    def decode(cls, ledger_id: int, data: bytes, version: int) -> Mark:
        """Read a mark. Raises ``MetadataError`` on a bad or unknown record."""
        try:
            record = load_record(data, f"mark of ledger {ledger_id}", (MARK_FORMAT_VERSION,))
        except RecordFormatError as error:
            raise MetadataError(str(error)) from None
        bookies, marked = record.get("lost_bookies"), record.get("marked_at_ms")
        if not isinstance(bookies, list) or not all(isinstance(b, str) for b in bookies) \
                or not isinstance(marked, int):
            raise MetadataError(f"mark of ledger {ledger_id}: bad record")
        return cls(ledger_id, frozenset(bookies), marked, version)


class UnderReplicationMarks:
    """The marks and locks of one cluster, on its metadata store."""

    def __init__(self, store: MetadataStore) -> None:
        self._store = store

    async def ledger_ids(self) -> list[int]:
        """The marked ledgers, by id."""
        try:
            names = await self._store.children(UNDER_REPLICATED_PATH)
        except NoNodeError:
            return []
        return [ledger_id_from_name(name) for name in names]

    async def get(self, ledger_id: int) -> Mark | None:
        """The ledger's mark, None if it has none."""
        try:
            node = await self._store.get(f"{UNDER_REPLICATED_PATH}/{_name(ledger_id)}")
        except NoNodeError:
            return None
        return Mark.decode(ledger_id, node.data, node.version)

    async def mark(self, ledger_id: int, lost_bookies: set[str] | frozenset[str]) -> bool:
        """Mark the ledger (or add bookies to its mark); True if anything changed.

        A concurrent change of the mark (``BadVersionError``) is left to the
        next audit, which sees the ledger again.
        """
        path = f"{UNDER_REPLICATED_PATH}/{_name(ledger_id)}"
        mark = Mark(ledger_id, frozenset(lost_bookies), int(time.time() * 1000), 0)
        try:
            await self._store.create(path, mark.encode(), make_parents=True)
            return True
        except NodeExistsError:
            pass
        existing = await self.get(ledger_id)
        if existing is None or existing.lost_bookies >= lost_bookies:
            return False
        merged = Mark(ledger_id, existing.lost_bookies | lost_bookies, existing.marked_at_ms,
                      existing.version)
        with contextlib.suppress(BadVersionError, NoNodeError):
            await self._store.set(path, merged.encode(), existing.version)
            return True
        return False

    async def clear(self, mark: Mark) -> bool:
        """Delete the mark if unchanged since read; False if it changed (or is gone)."""
        try:
            await self._store.delete(f"{UNDER_REPLICATED_PATH}/{_name(mark.ledger_id)}",
                                     mark.version)
        except (BadVersionError, NoNodeError):
            return False
        return True

    async def claim(self, ledger_id: int, worker_id: str) -> bool:
        """Take the ledger's lock (ephemeral); False if another worker holds it."""
        path = f"{LOCKS_PATH}/{_name(ledger_id)}"
        try:
            await self._store.create(path, worker_id.encode(), ephemeral=True,
                                     make_parents=True)
        except (NodeExistsError, MetadataUnavailableError):
            # Another worker's lock, or ours: a create whose answer was lost
            # (taken for another's, no one would re-replicate the ledger until
            # this session ended). The read tells; unreadable, it raises.
            return await landed(self._store, path, worker_id.encode()) is not None
        return True

    async def release(self, ledger_id: int) -> None:
        """Give the ledger's lock up (nothing if it is gone with an expired session)."""
        with contextlib.suppress(NoNodeError):
            await self._store.delete(f"{LOCKS_PATH}/{_name(ledger_id)}")

    async def elect_auditor(self, worker_id: str) -> bool:
        """Whether ``worker_id`` is the auditor, becoming it if no one is."""
        data = worker_id.encode()
        try:
            await self._store.create(AUDITOR_PATH, data, ephemeral=True, make_parents=True)
            return True
        except NodeExistsError:
            pass
        try:
            return (await self._store.get(AUDITOR_PATH)).data == data
        except NoNodeError:
            return False  # the auditor just left: the next round elects one
