"""The Kafka listeners of a broker as its settings name them (stdlib only: read by the settings).

``KafkaSecurityProtocol`` is what a listener asks of a connection (Kafka's
``security.protocol``).
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["KafkaSecurityProtocol"]


class KafkaSecurityProtocol(StrEnum):
    """What the Kafka listener asks of a connection (Kafka's ``security.protocol``)."""

    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"

    @property
    def tls(self) -> bool:
        """Whether connections are TLS."""
        return self in (KafkaSecurityProtocol.SSL, KafkaSecurityProtocol.SASL_SSL)

    @property
    def sasl(self) -> bool:
        """Whether connections authenticate with SASL."""
        return self in (KafkaSecurityProtocol.SASL_PLAINTEXT, KafkaSecurityProtocol.SASL_SSL)
