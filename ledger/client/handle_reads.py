"""HandleReads: a handle's reads of entries, each from a bookie of its write set.

Reads are bounded by the caller (the handle's LAC, or the closed end): asking
beyond it raises ``NoSuchEntryError`` before any bookie is asked. Successive
reads start at successive bookies of each write set (a rotation), spreading a
reader's load; a failed bookie's entries are read from the next one
(``entry_reads``). If every copy fails, auto-recovery may have moved them since
the handle read the metadata: the reads are retried where the latest metadata
says, once.
"""

from __future__ import annotations

from ledger.client.entry_reads import fetch_entries
from ledger.client.handle_metadata import HandleMetadata
from ledger.client.session import LedgerSession
from ledger.errors import (
    BookieUnavailableError,
    DataLossError,
    InvalidArgumentError,
    NoSuchEntryError,
)

__all__ = ["HandleReads"]


class HandleReads:
    """Reads of one ledger's entries through ``session``, on the handle's metadata."""

    def __init__(self, session: LedgerSession, metadata: HandleMetadata) -> None:
        self._session = session
        self._metadata = metadata
        self._rotation = 0

    async def read(self, first_entry_id: int, last_entry_id: int, bound: int, *,
                   adopt_latest: bool) -> list[bytes]:
        """Entries ``first_entry_id .. last_entry_id`` (inclusive, at most ``bound``), in order.

        With ``adopt_latest`` (a read-only handle) metadata read again after a
        failure is kept for later reads; a writer keeps its own.
        """
        ledger_id = self._metadata.current.ledger_id
        if first_entry_id < 0 or last_entry_id < first_entry_id:
            raise InvalidArgumentError(
                f"bad entry range [{first_entry_id}, {last_entry_id}]", ledger_id=ledger_id
            )
        if last_entry_id > bound:
            raise NoSuchEntryError(
                f"entry {last_entry_id} of ledger {ledger_id} is beyond the last add "
                f"confirmed ({bound})", ledger_id=ledger_id,
            )
        found: dict[int, bytes] = {}
        out: list[bytes] = []
        cursor = first_entry_id
        while cursor <= last_entry_id:
            data = found.pop(cursor, None)
            if data is None:
                await self._fetch(cursor, last_entry_id, found, adopt_latest)
                continue
            out.append(data)
            cursor += 1
        return out

    async def _fetch(self, cursor: int, last_entry_id: int, found: dict[int, bytes],
                     adopt_latest: bool) -> None:
        self._rotation += 1
        try:
            await fetch_entries(self._session, self._metadata.current, cursor, last_entry_id,
                                found, self._rotation)
        except (BookieUnavailableError, DataLossError):
            # Auto-recovery may have moved the copies to another bookie since this
            # handle read the metadata: read where the latest metadata says.
            latest, version = await self._metadata.latest()
            if latest.ensembles == self._metadata.current.ensembles:
                raise
            if adopt_latest:
                self._metadata.adopt(latest, version)
            await fetch_entries(self._session, latest, cursor, last_entry_id, found,
                                self._rotation)
