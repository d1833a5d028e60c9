"""Segments: a segment is an ordered chain of ledgers (Pulsar's managed ledger).

Appends, rollover, reads, seal, retention and truncation of one segment, its
entry format, offset index, writer table, persisted records and recovery on
load. Knows nothing of topics, system topics or the gRPC layer.

``segment.LedgerSegment`` holds parts, each given its collaborators and
tested alone (issue 26; the table is in docs/broker.md, "The segment's
parts"): the state it owns is in ``life`` (residence, seal, failure),
``chain`` (ledgers, start offset, record), ``pipeline`` (unconfirmed
entries, offsets, writers), ``txns`` (the transaction buffer and its
recovery), ``wakeup`` (the long polls' event) and ``rollover`` (with its
``gate``); ``recorder`` makes the record from them; ``appends``,
``markers``, ``reading``, ``head`` and ``lifecycle`` carry out the
operations through them. No mixins: the segment delegates once per call.
"""

__all__: list[str] = []
