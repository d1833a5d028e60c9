"""Ledger metadata: the embedded MetadataStore and the persisted ledger record.

``rocksdb_store.RocksDBMetadataStore`` is the standalone ``ledger.api.MetadataStore``
(ZooKeeper-shaped nodes in one RocksDB directory; ``_layout`` is its on-disk
format, ``paths`` the path rules any store applies). ``ledger_metadata`` is the
record kept per ledger (protobuf from ``ledger._proto.v1``, versioned).
"""

__all__: list[str] = []
