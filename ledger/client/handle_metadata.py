"""HandleMetadata: the ledger metadata a handle holds, and its compare-and-set.

A handle changes its ledger's metadata twice at most in its life (an ensemble
change, the close), always by compare-and-set on the version it read or wrote
last. Auto-recovery may change the metadata meanwhile, but only by swapping
bookies of closed fragments (``metadata_rebase``): such a conflict is redone on
top of the latest metadata; any other is the caller's to handle
(``BadVersionError``: someone else, a recovery, changed the ledger).

The outcome of a write that fails with an unknown outcome (timeout, connection
loss: ``MetadataUnavailableError``) is not known here either; the error goes to
the caller, whose next compare-and-set (or read) finds out what was applied.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from ledger.client.metadata_rebase import changed_only_closed_fragments
from ledger.client.session import LedgerSession
from ledger.errors import BadVersionError
from ledger.metadata.ledger_metadata import LedgerMetadata

__all__ = ["HandleMetadata"]

log = logging.getLogger(__name__)

#: Metadata writes redone on top of auto-recovery's changes before giving up.
_REBASE_ATTEMPTS = 5


class HandleMetadata:
    """One ledger's metadata as its handle last wrote or read it, and that version."""

    def __init__(self, session: LedgerSession, metadata: LedgerMetadata, version: int) -> None:
        self._session = session
        self._metadata = metadata
        self._version = version

    @property
    def current(self) -> LedgerMetadata:
        """The metadata as last written or read (adopted) by the handle."""
        return self._metadata

    @property
    def version(self) -> int:
        """The version of ``current`` in the metadata store."""
        return self._version

    async def latest(self) -> tuple[LedgerMetadata, int]:
        """The metadata in the store now and its version (not adopted)."""
        return await self._session.read_metadata(self._metadata.ledger_id)

    def adopt(self, metadata: LedgerMetadata, version: int) -> None:
        """Hold ``metadata`` (read from the store at ``version``) from now on."""
        self._metadata, self._version = metadata, version

    async def write(
        self, change: Callable[[LedgerMetadata], LedgerMetadata]
    ) -> LedgerMetadata:
        """Compare-and-set ``change(metadata)``; keep the result and its version.

        After a conflict with auto-recovery (it only swaps bookies of closed
        fragments: ``metadata_rebase``) the change is made again on the latest
        metadata. Raises ``BadVersionError`` if anyone else changed the ledger.
        """
        base, version, attempts = self._metadata, self._version, 0
        while True:
            updated = change(base)
            try:
                self._version = await self._session.write_metadata(updated, version)
            except BadVersionError:
                attempts += 1
                latest, latest_version = await self._session.read_metadata(
                    self._metadata.ledger_id)
                if attempts >= _REBASE_ATTEMPTS or not changed_only_closed_fragments(
                        self._metadata, latest):
                    raise
                log.info("ledger %d: closed fragments re-replicated meanwhile; writing on top",
                         self._metadata.ledger_id)
                base, version = latest, latest_version
                continue
            self._metadata = updated
            return updated
