"""DescribeConfigs (key 32), v1-v4: a topic's or a broker's configs under Kafka's names.

Topics (resource type 2) answer the names of ``broker.kafka.topic_configs``
with the topic's values, each with its source: TOPIC_CONFIG where it differs
from the broker's default, DEFAULT_CONFIG where it is the default
(``described_configs``). A broker (type 4, named by its node id or "") answers
``broker.kafka.broker_configs`` (read-only); another broker's id is
INVALID_REQUEST, as Kafka answers. A group (type 32) answers a share group's
configs (``share_configs``). Other resource types INVALID_REQUEST.

``include_synonyms`` (v1+) answers each config's synonyms as a Kafka broker
does: a topic config's own value (TOPIC_CONFIG) when the topic overrides it,
then the broker's default under the broker's name (``log.retention.ms`` for
``retention.ms``); a broker config, itself with its source. Without it the
list is empty. ``include_documentation`` (v3+) answers what each config means
on Folio (``broker.kafka.config_docs``); without it, null.
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from broker.errors import BrokerError
from broker.kafka.access import CLUSTER, TOPIC_LOOKUP, allowed
from broker.kafka.broker_configs import broker_configs
from broker.kafka.config_docs import config_doc
from broker.kafka.context import NODE_ID, KafkaContext
from broker.kafka.dispatch import Api, Call
from broker.kafka.error_codes import error_code
from broker.kafka.handlers.share_configs import GROUP_RESOURCE, describe_group_configs
from broker.kafka.messages import build, nested, response_class
from broker.kafka.partitions import check_served
from broker.kafka.topic_configs import DescribedConfig, described_configs
from ledger.errors import LedgerError

__all__ = ["DESCRIBE_CONFIGS_KEY", "ROWS"]

DESCRIBE_CONFIGS_KEY = 32
_TOPIC = 2
_BROKER = 4
_ZERO = datetime.timedelta(0)


async def handle_describe_configs(context: KafkaContext, call: Call) -> Any:
    """The configs of each resource asked."""
    cls = response_class(DESCRIBE_CONFIGS_KEY, call.version)
    result_cls = nested(cls, "DescribeConfigsResult")
    entry_cls = nested(cls, "DescribeConfigsResourceResult")
    synonym_cls = nested(cls, "DescribeConfigsSynonym")
    with_synonyms = bool(getattr(call.request, "include_synonyms", False))
    with_docs = bool(getattr(call.request, "include_documentation", False))
    results = []
    for resource in call.request.resources:
        code, message = ErrorCode.none, None
        configs: list[DescribedConfig] = []
        if resource.resource_type == _TOPIC and not allowed(context, call, TOPIC_LOOKUP,
                                                            resource.resource_name):
            code = TOPIC_LOOKUP.refused
            message = f"no permission on topic {resource.resource_name!r}"
        elif resource.resource_type == _BROKER and not allowed(context, call, CLUSTER, ""):
            code, message = CLUSTER.refused, "a broker's configs are a super-user's"
        elif resource.resource_type == _TOPIC:
            try:
                check_served(resource.resource_name)
                info = await context.topics.get_topic(resource.resource_name)
                configs = described_configs(info.config, context.topics.default_config())
            except (BrokerError, LedgerError) as error:
                code, message = error_code(error), str(error)
        elif resource.resource_type == GROUP_RESOURCE:
            code, message, configs = await describe_group_configs(context, call, resource)
        elif resource.resource_type == _BROKER:
            node_id = context.nodes.this_node().node_id if context.nodes else NODE_ID
            if resource.resource_name not in ("", str(node_id)):
                code = ErrorCode.invalid_request
                message = (f"unexpected broker id {resource.resource_name!r}: this broker is "
                           f"{node_id} (ask each broker for its own configs)")
            else:
                configs = broker_configs(context, node_id)
        else:
            code = ErrorCode.invalid_request
            message = f"resource type {resource.resource_type} is not supported"
        keys = resource.configuration_keys
        entries = tuple(
            build(entry_cls, name=entry.name, value=entry.value, read_only=entry.read_only,
                  config_source=entry.source, is_sensitive=False,
                  synonyms=tuple(build(synonym_cls, name=synonym.name, value=synonym.value,
                                       source=synonym.source)
                                 for synonym in entry.synonyms) if with_synonyms else (),
                  config_type=entry.config_type,
                  documentation=config_doc(entry.name) if with_docs else None)
            for entry in configs if keys is None or entry.name in keys)
        results.append(build(result_cls, error_code=code, error_message=message,
                             resource_type=resource.resource_type,
                             resource_name=resource.resource_name, configs=entries))
    return build(cls, throttle_time=_ZERO, results=tuple(results))


ROWS = (Api(DESCRIBE_CONFIGS_KEY, "DescribeConfigs", 1, 4, handle_describe_configs),)
