"""What the group and transaction handlers share: finding their coordinator, throttle time.

``coordinators_for`` answers whether this broker serves a key: the
coordinators, or the Kafka error the request gets (COORDINATOR_NOT_AVAILABLE
when none run, NOT_COORDINATOR for a key another broker coordinates).
"""

from __future__ import annotations

import datetime

from kio.schema.errors import ErrorCode

from broker.kafka.context import KafkaContext
from broker.kafka.coordinators import KafkaCoordinators

__all__ = ["ZERO", "coordinators_for"]

ZERO = datetime.timedelta(0)


def coordinators_for(context: KafkaContext, key_type: int, key: str | None,
                     ) -> tuple[ErrorCode, KafkaCoordinators | None]:
    """(NONE, the coordinators) if this broker coordinates ``key``, else (the error, None)."""
    coordinators = context.coordinators
    if coordinators is None:
        return ErrorCode.coordinator_not_available, None
    if not coordinators.locator.is_local(key_type, key or ""):
        return ErrorCode.not_coordinator, None
    return ErrorCode.none, coordinators
