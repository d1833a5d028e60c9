"""The connection limits a broker's Kafka listeners enforce now (``ConnectionQuotas``).

Made from the broker's flags and, over them, the dynamic broker configs
(``broker.kafka.dynamic_configs``): the broker cap, the per-IP count and its
overrides, the broker-wide connection creation rate, and each listener's own
cap and rate (Kafka's ``listener.name.<name>.max.connections`` and
``listener.name.<name>.max.connection.creation.rate``).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

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


def parse_overrides(text: str, what: str) -> dict[str, int]:
    """``address:count`` pairs, comma-separated (Kafka's ``max.connections.per.ip.overrides``).

    Addresses are IP addresses (normalised), counts >= 0. Raises ``ValueError``
    naming ``what`` and the pair that is not one.
    """
    overrides: dict[str, int] = {}
    for pair in text.split(","):
        if not pair.strip():
            continue
        address, _, count = pair.strip().rpartition(":")
        try:
            normal = str(ipaddress.ip_address(address.strip("[]")))
            limit = int(count)
        except ValueError:
            raise ValueError(f"{what}: {pair.strip()!r} is not address:count (an IP address, "
                             "a count >= 0)") from None
        if limit < 0:
            raise ValueError(f"{what}: {pair.strip()!r} is not address:count (an IP address, "
                             "a count >= 0)")
        overrides[normal] = limit
    return overrides
