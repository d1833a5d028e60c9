"""AlterConfigs (key 33) v0-v2 and IncrementalAlterConfigs (key 44) v0-v1: topic and broker configs.

Both change a topic's ``TopicConfig`` (``Topics.update_topic_config``, the
same call as ``folio topic config``) through the Kafka names of
``broker.kafka.topic_configs``:

- **IncrementalAlterConfigs**: SET (0) sets the value; DELETE (1) puts the
  config back to the broker's default for new topics; APPEND (2) and
  SUBTRACT (3) are for list configs, and the one list config a Folio topic
  has (``cleanup.policy``) takes only ``delete``: INVALID_CONFIG.
- **AlterConfigs** replaces the topic's whole set, as Kafka does: every
  config not named goes back to the default.

A name Folio has no equivalent for, a value that is not an integer or out of
Folio's range (``TopicConfig``'s checks) is INVALID_CONFIG with the reason,
and nothing of that resource is changed (the changes of one resource are one
``update_topic_config``: all or nothing). ``validate_only`` checks and
changes nothing. A broker (resource type 4) changes its dynamic configs, the
connection limits (``alter_broker_configs``); a group (32) a share group's
configs (``share_configs``); other resource types are INVALID_REQUEST.

Permissions: ``admin`` on the topic (Kafka's AlterConfigs on a topic); a
broker resource needs a super-user (the cluster).
"""

from __future__ import annotations

import datetime
from dataclasses import replace
from typing import Any

from kio.schema.errors import ErrorCode

from broker.errors import BrokerError
from broker.kafka.access import CLUSTER, TOPIC_ADMIN, allowed
from broker.kafka.context import KafkaContext
from broker.kafka.dispatch import Api, Call
from broker.kafka.error_codes import error_code
from broker.kafka.handlers.alter_broker_configs import alter_broker_configs
from broker.kafka.handlers.share_configs import GROUP_RESOURCE, alter_group_configs
from broker.kafka.messages import build, nested, response_class
from broker.kafka.partitions import check_served
from broker.kafka.topic_configs import (
    KAFKA_TO_FOLIO,
    UnknownConfigError,
    config_changes,
    reset_changes,
)
from ledger.errors import LedgerError

__all__ = ["ALTER_CONFIGS_KEY", "INCREMENTAL_ALTER_CONFIGS_KEY", "ROWS"]

ALTER_CONFIGS_KEY = 33
INCREMENTAL_ALTER_CONFIGS_KEY = 44
_TOPIC = 2
_BROKER = 4
_SET, _DELETE, _APPEND, _SUBTRACT = 0, 1, 2, 3
_ZERO = datetime.timedelta(0)

#: (error code, message) of one resource.
_Outcome = tuple[ErrorCode, str | None]


async def handle_alter_configs(context: KafkaContext, call: Call) -> Any:
    """Replace each topic's configs with those named (the others back to the default)."""
    return await _answer(context, call, ALTER_CONFIGS_KEY, incremental=False)


async def handle_incremental_alter_configs(context: KafkaContext, call: Call) -> Any:
    """Set or reset each config named, leaving the others."""
    return await _answer(context, call, INCREMENTAL_ALTER_CONFIGS_KEY, incremental=True)


async def _answer(context: KafkaContext, call: Call, key: int, *, incremental: bool) -> Any:
    cls = response_class(key, call.version)
    result_cls = nested(cls, "AlterConfigsResourceResponse")
    validate_only = bool(call.request.validate_only)
    responses = []
    for resource in call.request.resources:
        code, message = await _alter(context, call, resource, incremental=incremental,
                                     validate_only=validate_only)
        responses.append(build(result_cls, error_code=code, error_message=message,
                               resource_type=resource.resource_type,
                               resource_name=resource.resource_name))
    return build(cls, throttle_time=_ZERO, responses=tuple(responses))


async def _alter(context: KafkaContext, call: Call, resource: Any, *, incremental: bool,
                 validate_only: bool) -> _Outcome:
    name = resource.resource_name
    if resource.resource_type == _BROKER:
        if not allowed(context, call, CLUSTER, ""):
            return CLUSTER.refused, "a broker's configs are a super-user's"
        return await alter_broker_configs(context, resource, incremental=incremental,
                                          validate_only=validate_only)
    if resource.resource_type == GROUP_RESOURCE:
        return await alter_group_configs(context, call, resource, incremental=incremental,
                                         validate_only=validate_only)
    if resource.resource_type != _TOPIC:
        return (ErrorCode.invalid_request,
                f"resource type {resource.resource_type} is not supported")
    if not allowed(context, call, TOPIC_ADMIN, name):
        return TOPIC_ADMIN.refused, f"admin permission on topic {name!r} needed"
    try:
        check_served(name)
        info = await context.topics.get_topic(name)
        defaults = context.topics.default_config()
        try:
            if incremental:
                changes = _incremental_changes(resource.configs, defaults)
            else:
                changes = reset_changes(KAFKA_TO_FOLIO, defaults)
                changes.update(config_changes({entry.name: entry.value
                                               for entry in resource.configs}))
            replace(info.config, **changes)  # TopicConfig's checks: ValueError
        except (UnknownConfigError, ValueError) as error:
            return ErrorCode.invalid_config, str(error)
        if not validate_only and changes:
            await context.topics.update_topic_config(name, changes)
    except (BrokerError, LedgerError) as error:
        return error_code(error), str(error)
    return ErrorCode.none, None


def _incremental_changes(configs: Any, defaults: Any) -> dict[str, int]:
    """The ``TopicConfig`` fields IncrementalAlterConfigs' operations set."""
    changes: dict[str, int] = {}
    for entry in configs:
        if entry.config_operation == _SET:
            if entry.value is None:
                raise UnknownConfigError(f"SET of {entry.name!r} without a value (DELETE "
                                         "puts a config back to its default)")
            changes.update(config_changes({entry.name: entry.value}))
        elif entry.config_operation == _DELETE:
            changes.update(reset_changes([entry.name], defaults))
        elif entry.config_operation in (_APPEND, _SUBTRACT):
            raise UnknownConfigError(
                f"{'APPEND' if entry.config_operation == _APPEND else 'SUBTRACT'} of "
                f"{entry.name!r}: a Folio topic has no list config that takes more than one "
                "value (cleanup.policy is only delete)")
        else:
            raise UnknownConfigError(f"config operation {entry.config_operation} of "
                                     f"{entry.name!r} is not one of SET, DELETE, APPEND, "
                                     "SUBTRACT")
    return changes


ROWS = (
    Api(ALTER_CONFIGS_KEY, "AlterConfigs", 0, 2, handle_alter_configs),
    Api(INCREMENTAL_ALTER_CONFIGS_KEY, "IncrementalAlterConfigs", 0, 1,
        handle_incremental_alter_configs),
)
