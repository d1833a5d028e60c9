"""What a ledger handle and a recovery need from their client, as a Protocol.

``LedgerHandle`` and ``recover`` are made by ``LedgerClient`` and call back
into it (the configuration, bookies by id, the ledger's metadata by
compare-and-set). Typing them against this Protocol instead of the class keeps
the imports one way: ``ledger_client`` -> ``handle``/``recovery`` ->
``session``, with no circle through ``TYPE_CHECKING``.
"""

from __future__ import annotations

from typing import Protocol

from ledger.api import BookieClient
from ledger.client.directory import BookieDirectory
from ledger.config import LedgerConfig
from ledger.metadata.ledger_metadata import LedgerMetadata

__all__ = ["LedgerSession"]


class LedgerSession(Protocol):
    """The client side a handle and a recovery work through (``LedgerClient`` is one)."""

    @property
    def config(self) -> LedgerConfig:
        """Quorums, limits and timeouts."""
        ...

    @property
    def directory(self) -> BookieDirectory:
        """The bookies known: placement of replacements, marking failures."""
        ...

    def bookie(self, bookie_id: str) -> BookieClient:
        """The client of one bookie (the same object for the same id)."""
        ...

    async def read_metadata(self, ledger_id: int) -> tuple[LedgerMetadata, int]:
        """The ledger's metadata and its version; ``NoSuchLedgerError`` if it does not exist."""
        ...

    async def write_metadata(self, metadata: LedgerMetadata, expected_version: int) -> int:
        """Compare-and-set the ledger's metadata; the new version, or ``BadVersionError``."""
        ...
