"""The per-segment transaction buffer (Pulsar PIP-178).

Aborted transaction ids ordered by abort-marker position, open transactions
and max_read_position, snapshots in chunks keyed ``<segment>-1 .. <segment>-end``.
It uses ledger positions and the broker's segment interface, never gRPC.
Built by the transactions issue; this package is empty until then.
"""

__all__: list[str] = []
