"""The client quotas in the metadata store: one node, changed by compare-and-set, watched.

Every quota lives in one node, ``/folio/kafka/quotas`` (``QuotaTable.encode``:
versioned JSON), kept as ``broker.watched_table`` keeps such a table (as the
grants, ``broker.auth.acl_store``): Produce and Fetch look their quotas up in
``table`` in memory, reading no store. A change whose outcome is unknown
(``LedgerError``) is passed up: AlterClientQuotas answers it with the
retriable REQUEST_TIMED_OUT, and a retry is safe (setting a value again, or
removing a removed one, changes nothing).
"""

from __future__ import annotations

from collections.abc import Callable

from broker.kafka.quotas.table import QuotaTable
from broker.metadata_paths import QUOTAS_PATH
from broker.watched_table import WatchedTable
from ledger.api import MetadataStore

__all__ = ["QuotaStore"]


class QuotaStore:
    """The broker's view of the client quotas: ``table`` now, and changes by compare-and-set."""

    def __init__(self, store: MetadataStore) -> None:
        self._node = WatchedTable(store, QUOTAS_PATH, QuotaTable(), "kafka: the client quotas")

    @property
    def table(self) -> QuotaTable:
        """The quotas as last read or changed here."""
        return self._node.table

    async def start(self) -> None:
        """Create the node if missing, read it and watch it (``LedgerError`` if unreachable)."""
        await self._node.start()

    async def close(self) -> None:
        """Stop watching."""
        await self._node.close()

    async def change(self, edit: Callable[[QuotaTable], QuotaTable]) -> QuotaTable:
        """Apply ``edit`` to the stored table by compare-and-set (re-applied if another won).

        Raises ``LedgerError`` when the store does not answer (maybe applied),
        ``BadVersionError`` when others kept changing it meanwhile.
        """
        return await self._node.change(edit)
