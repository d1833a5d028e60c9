"""One bookie: stores ledger entries durably and serves them.

``storage.RocksDBLedgerStorage`` is the seam to the key-value store (one
RocksDB, one group-commit writer thread); ``bookie.Bookie`` validates and
exposes it as a ``ledger.api.BookieClient`` in this process; ``service``
serves it over gRPC; ``remote.GrpcBookieClient`` is the same
``BookieClient`` for a bookie in another process; ``main`` runs the
``folio bookie`` process.
"""

__all__: list[str] = []
