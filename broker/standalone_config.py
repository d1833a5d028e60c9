"""``StandaloneConfig``: the settings of ``folio standalone``."""

from __future__ import annotations

from dataclasses import dataclass

from broker.broker_config import BrokerConfig
from ledger.config import Durability

__all__ = ["StandaloneConfig"]

#: As ``ledger.bookie.collector.DEFAULT_GC_INTERVAL_MS`` (only the wiring in
#: ``broker.app`` may import ``ledger.bookie``): 15 minutes.
DEFAULT_GC_INTERVAL_MS = 15 * 60 * 1000


@dataclass(frozen=True)
class StandaloneConfig(BrokerConfig):
    """Everything ``folio standalone`` runs with: the broker's settings and its bookie's.

    Attributes (besides ``BrokerConfig``'s):
        durability: the in-process bookie's (``sync``: acknowledge once fsynced).
        gc: run the in-process bookie's garbage collector (``ledger.bookie.collector``):
            it drops ledgers whose metadata is gone (a delete the bookie failed,
            its storage failing at that moment).
        gc_interval_ms: time between two of its passes.
    """

    durability: Durability = Durability.SYNC
    gc: bool = True
    gc_interval_ms: int = DEFAULT_GC_INTERVAL_MS

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.gc_interval_ms <= 0:
            raise ValueError(f"gc_interval_ms must be positive, got {self.gc_interval_ms}")
