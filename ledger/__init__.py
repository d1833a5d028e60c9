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

Layout (the import-linter contracts in ``pyproject.toml`` keep it):

- ``api``: the contracts, ``WriteHandle``/``ReadHandle`` (what the layers
  above hold), ``BookieClient`` (one bookie, in process or remote) and
  ``MetadataStore`` (ZooKeeper-shaped), with their request/result types and
  the ledger states. Each method states ordering, durability and errors.
- ``client/``: ``LedgerClient`` (create, open with recovery, delete),
  ``handle`` (``LedgerHandle``: pipelined quorum adds, LAC, ensemble changes,
  reads), ``recovery``, ``directory`` (``BookieDirectory``: placement and
  reaching bookies by id), ``ledger_ids``, ``write_sets``; ``session`` is the
  Protocol handles and recovery call back through, so nothing imports in a circle.
- ``bookie/``: one bookie: ``storage`` (RocksDB, group commit: the KV seam),
  ``bookie`` (in process), ``service`` (its gRPC servicer and the server
  starter), ``remote`` (``GrpcBookieClient``, the protocol's client end),
  ``main`` (the ``folio bookie`` process).
- ``metadata/``: ``rocksdb_store`` (the embedded ``MetadataStore``) with its
  ``_layout`` and ``paths``; ``zookeeper_store`` (the cluster's, on ZooKeeper)
  with ``metadata_url``; ``stores`` (``open_store``: a store by URL scheme);
  ``paths`` (every ledger path's name), ``cluster_layout`` (the ledger's part
  of ``/cluster``), ``registration``, ``cluster_config``; ``ledger_metadata`` (the persisted
  ledger record). ``client/registry_directory`` places ledgers on the bookies
  registered there, ``bookie/membership`` registers a bookie.
- ``_proto/v1/``: the generated bookie and metadata stubs (internal: the SDK
  does not ship them); ``errors``, ``status`` (errors <-> gRPC status, as
  data), ``config``, ``metrics``, ``cli`` (``folio bookie``).

Where this differs from the layout first sketched, and why:

- ``directory`` and ``ledger_ids`` are in ``client/``, not ``metadata/``:
  today's directory is placement over bookie clients it is given (no
  registrations in the store yet), and id allocation is a step of
  ``LedgerClient.create``. When bookies register in ZooKeeper, the
  registration records belong in ``metadata/``.
- ``GrpcBookieClient`` is in ``bookie/remote``, not ``client/``: both ends
  of the bookie protocol change together, and ``client/`` reaches any bookie
  only through ``api.BookieClient`` (``bookie`` and ``client`` never import
  each other; whoever wires them, the broker or a test, picks one).
- ``status``, ``metrics`` and ``config`` stay at the top: both a bookie and
  the client use them.
"""

__all__: list[str] = []
