"""Segments: a segment is an ordered chain of ledgers (Pulsar's managed ledger).

Appends, rollover, reads, seal, retention and truncation of one segment, its
entry format, offset index, writer table, persisted records and recovery on
load. Knows nothing of topics, system topics or the gRPC layer.
"""

__all__: list[str] = []
