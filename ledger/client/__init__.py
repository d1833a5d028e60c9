"""The ledger client: LedgerClient, handles, open-with-recovery, placement, ledger ids."""

__all__: list[str] = []
