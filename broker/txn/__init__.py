"""Transactions: the coordinator of full transactions, held (PDP-44) blocks, commit keys.
"""

__all__: list[str] = []
