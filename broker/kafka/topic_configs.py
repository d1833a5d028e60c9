"""Kafka topic config names and Folio's topic config (``broker.api.TopicConfig``).

| Kafka                | Folio                  |
| retention.ms         | retention_ms           |
| retention.bytes      | retention_bytes        |
| max.message.bytes    | max_event_bytes        |
| segment.bytes        | ledger_rollover_bytes  |
| segment.ms           | ledger_rollover_ms     |
| cleanup.policy       | always "delete" (only that value is accepted) |

Any other name given at creation is INVALID_CONFIG, so a setting is never
silently dropped.
"""

from __future__ import annotations

from collections.abc import Mapping

from broker.api import TopicConfig

__all__ = ["KAFKA_TO_FOLIO", "UnknownConfigError", "config_changes", "kafka_configs"]

KAFKA_TO_FOLIO = {
    "retention.ms": "retention_ms",
    "retention.bytes": "retention_bytes",
    "max.message.bytes": "max_event_bytes",
    "segment.bytes": "ledger_rollover_bytes",
    "segment.ms": "ledger_rollover_ms",
}
_FIXED = {"cleanup.policy": "delete"}


class UnknownConfigError(ValueError):
    """A Kafka config name (or value) Folio has no equivalent for."""


def config_changes(configs: Mapping[str, str | None]) -> dict[str, int]:
    """The ``TopicConfig`` fields a Kafka topic's configs set.

    Raises ``UnknownConfigError`` for an unknown name or a non-integer value.
    """
    changes: dict[str, int] = {}
    for name, value in configs.items():
        if name in _FIXED:
            if value not in (None, _FIXED[name]):
                raise UnknownConfigError(f"{name}={value} is not supported (only "
                                         f"{_FIXED[name]})")
            continue
        field = KAFKA_TO_FOLIO.get(name)
        if field is None:
            raise UnknownConfigError(
                f"config {name!r} is not supported; supported: "
                f"{', '.join(sorted([*KAFKA_TO_FOLIO, *_FIXED]))}")
        if value is None:
            continue
        try:
            changes[field] = int(value)
        except ValueError:
            raise UnknownConfigError(f"config {name}={value!r} is not an integer") from None
    return changes


def kafka_configs(config: TopicConfig) -> dict[str, str]:
    """A Folio topic config as Kafka config names and values."""
    values = {name: str(getattr(config, field)) for name, field in KAFKA_TO_FOLIO.items()}
    values.update(_FIXED)
    return values
