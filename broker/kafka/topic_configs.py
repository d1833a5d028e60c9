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

Each config also carries its synonyms, as a Kafka broker lists them
(``ConfigHelper.createTopicConfigEntry``): the topic's own value first
(TOPIC_CONFIG) when it overrides the default, then the broker's default under
the broker's name for it (``BROKER_SYNONYMS``: Kafka's
``ServerTopicConfigSynonyms``, e.g. ``log.retention.ms`` for ``retention.ms``).
Folio's defaults for new topics are built in (``Topics.default_config`` is
``TopicConfig()``), not settings, so that synonym's source is DEFAULT_CONFIG
(STATIC_BROKER_CONFIG if a broker's defaults ever differ from the built-in
ones: ``default_source``), the source the broker resource reports for the same
key (``broker.kafka.broker_configs``); the config's own source is its first
synonym's, as in Kafka.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from broker.api import TopicConfig

__all__ = ["BROKER_SYNONYMS", "CONFIG_TYPES", "DEFAULT_CONFIG", "KAFKA_TO_FOLIO", "TOPIC_CONFIG",
           "DescribedConfig", "DescribedSynonym", "UnknownConfigError", "config_changes",
           "default_source", "described_configs", "kafka_configs", "reset_changes"]

KAFKA_TO_FOLIO = {
    "retention.ms": "retention_ms",
    "retention.bytes": "retention_bytes",
    "max.message.bytes": "max_event_bytes",
    "segment.bytes": "ledger_rollover_bytes",
    "segment.ms": "ledger_rollover_ms",
}
_FIXED = {"cleanup.policy": "delete"}
#: Each topic config's broker default, by the broker config's name (Kafka's
#: ``ServerTopicConfigSynonyms``: the first, highest-priority, name of each;
#: Kafka's lower-priority ``log.retention.minutes``/``hours`` and
#: ``log.roll.hours`` are not Folio settings).
BROKER_SYNONYMS = {
    "retention.ms": "log.retention.ms",
    "retention.bytes": "log.retention.bytes",
    "max.message.bytes": "message.max.bytes",
    "segment.bytes": "log.segment.bytes",
    "segment.ms": "log.roll.ms",
    "cleanup.policy": "log.cleanup.policy",
}

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
class DescribedSynonym:
    """One of a config's synonyms: where a value of it is set, by that place's name for it."""

    name: str
    value: str
    source: int


@dataclass(frozen=True, slots=True)
class DescribedConfig:
    """One config as DescribeConfigs reports it.

    ``synonyms``: every place a value of it is set, the one in force first
    (what DescribeConfigs answers when asked ``include_synonyms``).
    """

    name: str
    value: str
    source: int
    config_type: int
    read_only: bool = False
    synonyms: tuple[DescribedSynonym, ...] = ()


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


#: Folio's built-in defaults of new topics, under Kafka's names.
_BUILT_IN = kafka_configs(TopicConfig())


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


def default_source(name: str, default: str) -> int:
    """The source of the broker's default ``default`` of topic config ``name``.

    DEFAULT_CONFIG where it is Folio's built-in default (``TopicConfig()``),
    STATIC_BROKER_CONFIG where the broker was set up with another.
    """
    return DEFAULT_CONFIG if _BUILT_IN[name] == default else STATIC_BROKER_CONFIG


def described_configs(config: TopicConfig, defaults: TopicConfig) -> list[DescribedConfig]:
    """Every Kafka config of a topic, by name, with its source and synonyms against ``defaults``.

    ``defaults``: the broker's config of new topics (``Topics.default_config``).
    """
    values, default_values = kafka_configs(config), kafka_configs(defaults)
    described = []
    for name, value in values.items():
        default = DescribedSynonym(BROKER_SYNONYMS[name], default_values[name],
                                   default_source(name, default_values[name]))
        synonyms = (default,) if value == default.value else (
            DescribedSynonym(name, value, TOPIC_CONFIG), default)
        described.append(DescribedConfig(name, value, synonyms[0].source, CONFIG_TYPES[name],
                                         synonyms=synonyms))
    return sorted(described, key=lambda entry: entry.name)
