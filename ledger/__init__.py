"""The ledger service: BookKeeper-style append-only ledgers on RocksDB.

A **ledger** is a log of entries 0, 1, 2, ... written by one writer (a
``LedgerHandle``) to an **ensemble** of E bookies, each entry to Qw of them
(round-robin write sets) and confirmed once Qa have made it durable. The
writer's last add confirmed (LAC) travels on its adds so readers never read
past what is confirmed. A ledger is closed once, with its last entry id and
length in the metadata store.

**Fencing** makes replacement safe: opening a ledger with recovery marks it
IN_RECOVERY, fences its bookies (the old writer's adds then fail with
``LedgerFencedError``), reads the tail with fencing reads, re-replicates what
reached fewer than Qw bookies and closes the ledger at the agreed end.

Pieces: ``storage`` (one bookie's RocksDB, group commit), ``bookie`` (a bookie
in process), ``bookie_grpc`` (its gRPC service and client), ``metadata_store``
(embedded MetadataStore), ``ledger_metadata`` (the persisted record),
``handle``/``client`` (LedgerClient and LedgerHandle), ``recovery``.
"""

__all__: list[str] = []
