"""The connection limits a broker's Kafka listeners enforce now (``ConnectionQuotas``).

Made from the broker's flags and, over them, the dynamic broker configs
(``broker.kafka.dynamic_configs``): the broker cap, the per-IP count and its
overrides, the broker-wide connection creation rate, and each listener's own
cap and rate (Kafka's ``listener.name.<name>.max.connections`` and
``listener.name.<name>.max.connection.creation.rate``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from broker.broker_config import parse_overrides

__all__ = ["UNLIMITED", "ConnectionLimits", "ListenerLimits", "parse_overrides"]

#: Kafka's default of ``max.connections``, ``max.connections.per.ip`` and the
#: connection creation rates: no limit.
UNLIMITED: Final = 2**31 - 1


@dataclass(frozen=True, slots=True)
class ListenerLimits:
    """One listener's cap on open connections and on new connections a second."""

    max_connections: int = UNLIMITED
    connection_rate: int = UNLIMITED


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """Every connection limit of one broker; a listener not in ``listeners`` has none of its own."""

    max_connections: int = UNLIMITED
    max_per_ip: int = UNLIMITED
    per_ip_overrides: Mapping[str, int] = field(default_factory=dict)
    connection_rate: int = UNLIMITED
    listeners: Mapping[str, ListenerLimits] = field(default_factory=dict)

    def listener(self, name: str) -> ListenerLimits:
        """The limits of listener ``name`` (none when it has no settings of its own)."""
        return self.listeners.get(name.upper(), _NO_LIMITS)


_NO_LIMITS: Final = ListenerLimits()
