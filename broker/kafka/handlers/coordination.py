"""What the group and transaction handlers share: finding their coordinator, throttle time.

``coordinators_for`` answers whether this broker serves a key: the
coordinators, or the Kafka error the request gets (COORDINATOR_NOT_AVAILABLE
when none run, NOT_COORDINATOR for a key another broker coordinates);
``checked_coordinators`` checks the caller's permission on the key first
(``broker.kafka.access``).
"""

from __future__ import annotations

import datetime

from kio.schema.errors import ErrorCode

from broker.kafka.access import Requirement, allowed
from broker.kafka.context import KafkaContext
from broker.kafka.coordinators import KafkaCoordinators
from broker.kafka.dispatch import Call

__all__ = ["ZERO", "checked_coordinators", "coordinators_for"]

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


def checked_coordinators(context: KafkaContext, call: Call, requirement: Requirement,
                         key_type: int, key: str | None,
                         ) -> tuple[ErrorCode, KafkaCoordinators | None]:
    """``coordinators_for``, after checking ``requirement`` on ``key`` (first, as Kafka does)."""
    if not allowed(context, call, requirement, key or ""):
        return requirement.refused, None
    return coordinators_for(context, key_type, key)
