"""``StandaloneConfig``: the settings of ``folio standalone``."""

from __future__ import annotations

from dataclasses import dataclass

from broker.segments.writers import DEFAULT_WRITER_EXPIRY_MS
from broker.txn.held import DEFAULT_MAX_HELD_BYTES, DEFAULT_MAX_HELD_MS
from ledger.config import Durability
from txnbuffer.api import SnapshotPolicy
from txnbuffer.snapshot import chunk_capacity

__all__ = ["StandaloneConfig"]

_DEFAULT_SNAPSHOTS = SnapshotPolicy()


@dataclass(frozen=True)
class StandaloneConfig:
    """Everything ``folio standalone`` runs with.

    Attributes:
        data_dir: directory of all data (metadata and bookie), created if missing.
        host: address the gRPC API and metrics listen on.
        port: port of the gRPC API, 0 for any free one.
        metrics_port: port of the Prometheus metrics endpoint, 0 for any free one.
        durability: the bookie's (``sync``: acknowledge once fsynced).
        stop_grace_s: seconds in-flight calls get to finish on shutdown.
        retention_interval_s: how often retention, rollover by age and writer
            expiry run.
        writer_expiry_ms: segments forget writers idle longer than this.
        max_held_bytes: bytes of uncommitted transaction blocks (``end = false``)
            the broker holds over all streams.
        max_held_ms: how long a flow may hold transaction blocks.
        txn_snapshot_every_changes: a segment's transaction buffer writes a
            snapshot after this many changes ...
        txn_snapshot_every_ms: ... or this long after the last one.
        txn_snapshot_chunk_bytes: the largest snapshot chunk; 0 = as large as
            a record of ``_txnbuffer_snapshots`` may be.
    """

    data_dir: str = "./folio-data"
    host: str = "127.0.0.1"
    port: int = 7070
    metrics_port: int = 7071
    durability: Durability = Durability.SYNC
    stop_grace_s: float = 10.0
    retention_interval_s: float = 30.0
    writer_expiry_ms: int = DEFAULT_WRITER_EXPIRY_MS
    max_held_bytes: int = DEFAULT_MAX_HELD_BYTES
    max_held_ms: int = DEFAULT_MAX_HELD_MS
    txn_snapshot_every_changes: int = _DEFAULT_SNAPSHOTS.every_changes
    txn_snapshot_every_ms: int = _DEFAULT_SNAPSHOTS.every_ms
    txn_snapshot_chunk_bytes: int = _DEFAULT_SNAPSHOTS.chunk_bytes

    def __post_init__(self) -> None:
        for name in ("port", "metrics_port"):
            value = getattr(self, name)
            if not 0 <= value <= 65535:
                raise ValueError(f"{name} must be in [0, 65535], got {value}")
        if self.stop_grace_s < 0 or self.retention_interval_s <= 0:
            raise ValueError("stop_grace_s must be >= 0 and retention_interval_s > 0")
        for name in ("writer_expiry_ms", "max_held_bytes", "max_held_ms"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        try:
            self.txn_snapshots()
            if self.txn_snapshot_chunk_bytes:
                chunk_capacity(self.txn_snapshot_chunk_bytes)  # one abort per chunk at least
        except ValueError as error:
            raise ValueError(f"txn_snapshot_*: {error}") from None

    def txn_snapshots(self) -> SnapshotPolicy:
        """The transaction buffers' snapshot policy these settings make."""
        return SnapshotPolicy(self.txn_snapshot_every_changes, self.txn_snapshot_every_ms,
                              self.txn_snapshot_chunk_bytes)
