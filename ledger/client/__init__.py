"""The ledger client: what the layers above use to create, write, open and read ledgers.

``ledger_client.LedgerClient`` makes ``handle.LedgerHandle`` objects (a
``WriteHandle`` or ``ReadHandle`` of ``ledger.api``); ``recovery`` fences and
closes a ledger on open; ``directory`` places ensembles and reaches bookies by
id; ``ledger_ids`` allocates ids by compare-and-set; ``write_sets`` says which
ensemble positions hold which entries. Handles and recovery see their client
only as ``session.LedgerSession``.
"""

__all__: list[str] = []
