"""``StandaloneConfig``: the settings of ``folio standalone``."""

from __future__ import annotations

from dataclasses import dataclass

from ledger.config import Durability

__all__ = ["StandaloneConfig"]


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
        retention_interval_s: how often retention and rollover by age run.
    """

    data_dir: str = "./folio-data"
    host: str = "127.0.0.1"
    port: int = 7070
    metrics_port: int = 7071
    durability: Durability = Durability.SYNC
    stop_grace_s: float = 10.0
    retention_interval_s: float = 30.0

    def __post_init__(self) -> None:
        for name in ("port", "metrics_port"):
            value = getattr(self, name)
            if not 0 <= value <= 65535:
                raise ValueError(f"{name} must be in [0, 65535], got {value}")
        if self.stop_grace_s < 0 or self.retention_interval_s <= 0:
            raise ValueError("stop_grace_s must be >= 0 and retention_interval_s > 0")
