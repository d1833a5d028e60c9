"""Ledger metadata: the MetadataStores, the persisted ledger record and a cluster's layout.

``stores.open_store(url)`` opens a store by its URL's scheme (``zk://``,
``rocksdb:///PATH``); callers hold it as a ``ledger.api.MetadataStore``.
``rocksdb_store.RocksDBMetadataStore`` is the standalone ``ledger.api.MetadataStore``
(ZooKeeper-shaped nodes in one RocksDB directory; ``_layout`` is its on-disk
format, ``paths`` the path rules any store applies). ``zookeeper_store.ZooKeeperMetadataStore``
is the cluster's, on ZooKeeper through kazoo, opened from a ``metadata_url``
(``zk://HOST:PORT[,...]/CHROOT``). ``cluster_layout`` names every path of a
cluster and holds its ``/cluster`` record; ``registration`` keeps ephemeral
registrations alive; ``cluster_config`` is the ``--metadata-url`` settings.
``ledger_metadata`` is the record kept per ledger (protobuf from
``ledger._proto.v1``, versioned).
"""

__all__: list[str] = []
