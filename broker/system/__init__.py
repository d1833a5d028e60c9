"""System topics: the broker's own state in (compacted) topics of its own.

``CompactedTopic`` (latest record per key, compaction), its record format, and
the transaction buffers' snapshot store on ``_txnbuffer_snapshots``.
"""

__all__: list[str] = []
