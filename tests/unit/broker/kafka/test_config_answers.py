"""DescribeConfigs' synonyms, sources and documentation at every served version.

The handlers are called at every served version with a kio request, as the
connection calls them, and each answer goes through kio's encoder and decoder
(what the client reads), with a small topics double behind the context.
"""

from __future__ import annotations

import io
from typing import Any, cast

import pytest

from broker.api import TopicConfig, TopicInfo, Topics
from broker.kafka.broker_configs import broker_configs
from broker.kafka.config_docs import CONFIG_DOCS
from broker.kafka.context import KafkaContext
from broker.kafka.dispatch import Call
from broker.kafka.handlers.configs import DESCRIBE_CONFIGS_KEY, handle_describe_configs
from broker.kafka.messages import (
    build,
    decode_entity,
    encode_entity,
    nested,
    request_class,
    response_class,
)
from broker.kafka.producer_ids import ProducerIds
from broker.kafka.topic_configs import (
    BROKER_SYNONYMS,
    DEFAULT_CONFIG,
    STATIC_BROKER_CONFIG,
    TOPIC_CONFIG,
    DescribedSynonym,
    described_configs,
)

_TOPIC, _BROKER = 2, 4


class _Topics:
    """The calls DescribeConfigs makes, on one topic."""

    def __init__(self, config: TopicConfig) -> None:
        self.config = config

    def default_config(self) -> TopicConfig:
        return TopicConfig()

    async def get_topic(self, name: str) -> TopicInfo:
        return cast(TopicInfo, _Info(name, self.config))


class _Info:
    def __init__(self, name: str, config: TopicConfig) -> None:
        self.name, self.config = name, config


def _context(config: TopicConfig | None = None, **fields: Any) -> KafkaContext:
    # DescribeConfigs never gives out producer ids.
    return KafkaContext(cast(Topics, _Topics(config or TopicConfig())), "127.0.0.1",
                        cast(ProducerIds, None), port=9092, **fields)


def _round_trip(api_key: int, version: int, answer: Any) -> Any:
    cls = response_class(api_key, version)
    out = io.BytesIO()
    encode_entity(cls, answer, out)
    decoded, size = decode_entity(cls, out.getvalue(), 0)
    assert size == len(out.getvalue())
    return decoded


async def _describe(context: KafkaContext, version: int, resource_type: int, name: str,
                    **flags: bool) -> dict[str, Any]:
    cls = request_class(DESCRIBE_CONFIGS_KEY, version)
    resource = build(nested(cls, "DescribeConfigsResource"), resource_type=resource_type,
                     resource_name=name, configuration_keys=None)
    request = build(cls, resources=(resource,), **flags)
    answer = await handle_describe_configs(context, Call(DESCRIBE_CONFIGS_KEY, version, 1,
                                                         None, request))
    (result,) = _round_trip(DESCRIBE_CONFIGS_KEY, version, answer).results
    assert result.error_code.value == 0, result.error_message
    return {entry.name: entry for entry in result.configs}


def test_a_topic_configs_synonyms_are_its_override_then_the_brokers_default() -> None:
    defaults = TopicConfig()
    described = {entry.name: entry for entry in described_configs(
        TopicConfig(retention_ms=3_600_000), defaults)}
    assert described["retention.ms"].synonyms == (
        DescribedSynonym("retention.ms", "3600000", TOPIC_CONFIG),
        DescribedSynonym("log.retention.ms", "-1", DEFAULT_CONFIG))
    assert described["retention.ms"].source == TOPIC_CONFIG
    assert described["max.message.bytes"].synonyms == (
        DescribedSynonym("message.max.bytes", str(defaults.max_event_bytes), DEFAULT_CONFIG),)
    assert described["max.message.bytes"].source == DEFAULT_CONFIG
    assert described["cleanup.policy"].synonyms == (
        DescribedSynonym("log.cleanup.policy", "delete", DEFAULT_CONFIG),)
    # A broker whose defaults differ from Folio's built-in ones: a static broker config.
    changed = {entry.name: entry for entry in described_configs(
        TopicConfig(ledger_rollover_ms=7_200_000), TopicConfig(ledger_rollover_ms=7_200_000))}
    assert changed["segment.ms"].synonyms == (
        DescribedSynonym("log.roll.ms", "7200000", STATIC_BROKER_CONFIG),)
    assert changed["segment.ms"].source == STATIC_BROKER_CONFIG


def test_the_brokers_sources_say_what_a_setting_changed() -> None:
    plain = {entry.name: entry for entry in broker_configs(_context(), 0)}
    for name in BROKER_SYNONYMS.values():
        assert plain[name].source == DEFAULT_CONFIG, name
    assert plain["num.partitions"].source == DEFAULT_CONFIG
    assert plain["group.min.session.timeout.ms"].source == DEFAULT_CONFIG
    assert plain["advertised.listeners"].source == STATIC_BROKER_CONFIG
    assert plain["broker.id"].source == STATIC_BROKER_CONFIG
    for entry in plain.values():
        assert entry.synonyms == (DescribedSynonym(entry.name, entry.value, entry.source),)
    set_up = {entry.name: entry for entry in broker_configs(
        _context(num_partitions=3, auto_create_topics=False), 0)}
    assert (set_up["num.partitions"].value, set_up["num.partitions"].source) \
        == ("3", STATIC_BROKER_CONFIG)
    assert (set_up["auto.create.topics.enable"].value,
            set_up["auto.create.topics.enable"].source) == ("false", STATIC_BROKER_CONFIG)


def test_every_reported_config_has_documentation() -> None:
    names = {entry.name for entry in broker_configs(_context(), 0)}
    names |= {entry.name for entry in described_configs(TopicConfig(), TopicConfig())}
    assert names <= set(CONFIG_DOCS), names - set(CONFIG_DOCS)


@pytest.mark.parametrize("version", [1, 2, 3, 4])
async def test_describe_configs_answers_synonyms_only_when_asked(version: int) -> None:
    context = _context(TopicConfig(retention_ms=3_600_000))
    plain = await _describe(context, version, _TOPIC, "t")
    assert all(entry.synonyms == () for entry in plain.values())
    assert plain["retention.ms"].config_source == TOPIC_CONFIG
    asked = await _describe(context, version, _TOPIC, "t", include_synonyms=True)
    assert [(s.name, s.value, s.source) for s in asked["retention.ms"].synonyms] \
        == [("retention.ms", "3600000", TOPIC_CONFIG), ("log.retention.ms", "-1", DEFAULT_CONFIG)]
    assert [(s.name, s.source) for s in asked["segment.bytes"].synonyms] \
        == [("log.segment.bytes", DEFAULT_CONFIG)]
    broker = await _describe(context, version, _BROKER, "0", include_synonyms=True)
    assert [(s.name, s.value, s.source) for s in broker["broker.id"].synonyms] \
        == [("broker.id", "0", STATIC_BROKER_CONFIG)]


@pytest.mark.parametrize("version", [3, 4])
async def test_describe_configs_answers_documentation_only_when_asked(version: int) -> None:
    context = _context()
    plain = await _describe(context, version, _TOPIC, "t")
    assert all(entry.documentation is None for entry in plain.values())
    asked = await _describe(context, version, _TOPIC, "t", include_documentation=True)
    assert asked["retention.ms"].documentation == CONFIG_DOCS["retention.ms"]
    broker = await _describe(context, version, _BROKER, "", include_documentation=True)
    assert broker["num.partitions"].documentation == CONFIG_DOCS["num.partitions"]
