"""Transactions: the coordinator of full transactions and commit keys.

Held (PDP-44) blocks and the Append stream are ``broker.appends``.
"""

__all__: list[str] = []
