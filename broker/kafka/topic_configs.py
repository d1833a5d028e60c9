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

``described_configs`` gives each name with its source as DescribeConfigs
reports it: TOPIC_CONFIG (Kafka's DYNAMIC_TOPIC_CONFIG, 1) where the topic's
value differs from the broker's default for new topics, DEFAULT_CONFIG (5)
where it is the default. A Folio topic stores every field, so a value set on
the topic equal to the default is reported as the default (it behaves the same).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from broker.api import TopicConfig

__all__ = ["CONFIG_TYPES", "DEFAULT_CONFIG", "KAFKA_TO_FOLIO", "TOPIC_CONFIG",
           "DescribedConfig", "UnknownConfigError", "config_changes", "described_configs",
           "kafka_configs", "reset_changes"]

KAFKA_TO_FOLIO = {
    "retention.ms": "retention_ms",
    "retention.bytes": "retention_bytes",
    "max.message.bytes": "max_event_bytes",
    "segment.bytes": "ledger_rollover_bytes",
    "segment.ms": "ledger_rollover_ms",
}
_FIXED = {"cleanup.policy": "delete"}

#: DescribeConfigs' config sources (Kafka's ``ConfigSource``).
TOPIC_CONFIG = 1
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5
#: DescribeConfigs' config types (Kafka's ``ConfigType``: 1 boolean, 3 int, 5 long, 7 list).
BOOLEAN, STRING, INT, LONG, LIST = 1, 2, 3, 5, 7
CONFIG_TYPES = {
    "retention.ms": LONG,
    "retention.bytes": LONG,
    "max.message.bytes": INT,
    "segment.bytes": INT,
    "segment.ms": LONG,
    "cleanup.policy": LIST,
}


@dataclass(frozen=True, slots=True)
class DescribedConfig:
    """One config as DescribeConfigs reports it."""

    name: str
    value: str
    source: int
    config_type: int
    read_only: bool = False


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


def reset_changes(names: Iterable[str], defaults: TopicConfig) -> dict[str, int]:
    """The ``TopicConfig`` fields that put the Kafka configs ``names`` back to ``defaults``.

    ``UnknownConfigError`` for a name Folio has no equivalent for.
    """
    changes: dict[str, int] = {}
    for name in names:
        if name in _FIXED:
            continue
        field = KAFKA_TO_FOLIO.get(name)
        if field is None:
            raise UnknownConfigError(
                f"config {name!r} is not supported; supported: "
                f"{', '.join(sorted([*KAFKA_TO_FOLIO, *_FIXED]))}")
        changes[field] = getattr(defaults, field)
    return changes


def described_configs(config: TopicConfig, defaults: TopicConfig) -> list[DescribedConfig]:
    """Every Kafka config of a topic, by name, with its source against the broker's ``defaults``."""
    described = [DescribedConfig(
        name, str(getattr(config, field)),
        DEFAULT_CONFIG if getattr(config, field) == getattr(defaults, field) else TOPIC_CONFIG,
        CONFIG_TYPES[name]) for name, field in KAFKA_TO_FOLIO.items()]
    described += [DescribedConfig(name, value, DEFAULT_CONFIG, CONFIG_TYPES[name])
                  for name, value in _FIXED.items()]
    return sorted(described, key=lambda entry: entry.name)
