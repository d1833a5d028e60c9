"""Share groups' configs through IncrementalAlterConfigs / AlterConfigs on a GROUP resource.

Kafka's group configs of a share group (``broker.kafka.share_groups.config``:
``share.record.lock.duration.ms``, ``share.delivery.count.limit``,
``share.auto.offset.reset``, ``share.isolation.level``,
``share.session.timeout.ms``, ``share.heartbeat.interval.ms``). SET sets,
DELETE puts one back to the broker's default; APPEND and SUBTRACT are for
list configs, which a group has none of (INVALID_CONFIG). AlterConfigs
replaces the whole set. A name or value Kafka refuses is INVALID_CONFIG with
the reason, and nothing of the resource changes. Needs ``admin`` on the group.
DescribeConfigs of a GROUP resource answers every share group config, with
source GROUP_CONFIG where set on the group, else DEFAULT_CONFIG.
The configs are written (to the share state topic; on a cluster to the
metadata store, which every broker watches: ``share_groups.group_configs``)
before they take effect;
``share.auto.offset.reset`` applies to the share partitions a group starts
afterwards (a started one keeps its start, as in Kafka).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.errors import BrokerError
from broker.kafka.access import GROUP_ADMIN, GROUP_LOOKUP, allowed
from broker.kafka.context import KafkaContext
from broker.kafka.dispatch import Call
from broker.kafka.error_codes import error_code
from broker.kafka.handlers.share_membership import NO_SHARE_GROUPS, shares_of
from broker.kafka.share_groups.config import (
    GROUP_CONFIGS,
    GroupConfigError,
    check_group_config_name,
    checked_group_config,
)
from broker.kafka.topic_configs import DEFAULT_CONFIG, INT, STRING, DescribedConfig
from ledger.errors import LedgerError

__all__ = ["GROUP_RESOURCE", "alter_group_configs", "describe_group_configs"]

GROUP_RESOURCE = 32
_SET, _DELETE = 0, 1
#: DescribeConfigs' source of a config set on a group (Kafka's ``ConfigSource.GROUP_CONFIG``).
_GROUP_CONFIG = 8


async def describe_group_configs(context: KafkaContext, call: Call, resource: Any,
                                 ) -> tuple[ErrorCode, str | None, list[DescribedConfig]]:
    """DescribeConfigs of a GROUP resource: every share group config, GROUP_CONFIG where
    set on the group, else DEFAULT_CONFIG (the broker's); needs any permission on it."""
    group_id = resource.resource_name
    if not allowed(context, call, GROUP_LOOKUP, group_id):
        return GROUP_LOOKUP.refused, f"no permission on group {group_id!r}", []
    shares = shares_of(context)
    if shares is None:
        return ErrorCode.invalid_request, NO_SHARE_GROUPS, []
    try:
        await shares.load_group(group_id)
    except (BrokerError, LedgerError) as error:
        code = error_code(error) if isinstance(error, BrokerError) \
            else ErrorCode.kafka_storage_error
        return code, str(error), []
    set_here = shares.group_configs(group_id)
    configs = []
    for name, (field, kind) in sorted(GROUP_CONFIGS.items()):
        if name in set_here:
            value, source = set_here[name], _GROUP_CONFIG
        else:
            value, source = str(getattr(shares.config, field)), DEFAULT_CONFIG
        configs.append(DescribedConfig(name, value, source, INT if kind is int else STRING))
    return ErrorCode.none, None, configs


async def alter_group_configs(context: KafkaContext, call: Call, resource: Any, *,
                              incremental: bool, validate_only: bool,
                              ) -> tuple[ErrorCode, str | None]:
    """Change one group's configs (module docstring); the resource's error, if any."""
    group_id = resource.resource_name
    if not allowed(context, call, GROUP_ADMIN, group_id):
        return GROUP_ADMIN.refused, f"admin permission on group {group_id!r} needed"
    shares = shares_of(context)
    if shares is None:
        return ErrorCode.invalid_request, NO_SHARE_GROUPS
    try:
        await shares.load_group(group_id)
        configs = shares.group_configs(group_id) if incremental else {}
        try:
            for entry in resource.configs:
                operation = entry.config_operation if incremental else _SET
                if operation == _SET:
                    configs[entry.name] = checked_group_config(entry.name, entry.value)
                elif operation == _DELETE:
                    check_group_config_name(entry.name)
                    configs.pop(entry.name, None)
                else:
                    raise GroupConfigError(f"operation {operation} of {entry.name!r}: a group "
                                           "has no list config")
            shares.config.with_group(configs)
        except (GroupConfigError, ValueError) as error:
            return ErrorCode.invalid_config, str(error)
        if not validate_only:
            await shares.set_group_configs(group_id, configs)
    except (BrokerError, LedgerError) as error:
        code = error_code(error) if isinstance(error, BrokerError) \
            else ErrorCode.kafka_storage_error
        return code, str(error)
    return ErrorCode.none, None
