"""``StandaloneConfig``: the settings of ``folio standalone``."""

from __future__ import annotations

from dataclasses import dataclass

from broker.broker_config import BrokerConfig
from ledger.config import Durability

__all__ = ["StandaloneConfig"]


@dataclass(frozen=True)
class StandaloneConfig(BrokerConfig):
    """Everything ``folio standalone`` runs with: the broker's settings and its bookie's.

    Attributes (besides ``BrokerConfig``'s):
        durability: the in-process bookie's (``sync``: acknowledge once fsynced).
    """

    durability: Durability = Durability.SYNC
