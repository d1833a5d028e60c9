"""AlterConfigs and IncrementalAlterConfigs of a broker (resource type 4): its dynamic configs.

The keys and their checks are ``broker.kafka.dynamic_configs``'s. The
resource name is "" (the cluster-wide default) or this broker's node id (as
Kafka, another broker's id is INVALID_REQUEST: a client sends a broker's
configs to that broker). Kafka's answers:

- a key Folio does not change at runtime: INVALID_REQUEST ("cannot update
  ... dynamically"), with the keys it does change;
- a value of the wrong type or range, APPEND/SUBTRACT (no dynamic key is a
  list), SET without a value: INVALID_CONFIG with the reason;
- IncrementalAlterConfigs SETs and DELETEs the keys named; AlterConfigs
  replaces the scope's whole set (a key not named is no longer set there).

All of a resource's changes are checked first and applied in one
compare-and-set, or none (``validate_only``: checked only). An unreachable
store is the ``LedgerError``'s code (maybe applied; a retry is safe).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.kafka.context import NODE_ID, KafkaContext
from broker.kafka.dynamic_configs import (
    InvalidConfigError,
    NotDynamicError,
    canonical_key,
    check_config,
)
from broker.kafka.error_codes import error_code
from ledger.errors import LedgerError

__all__ = ["alter_broker_configs"]

_SET, _DELETE, _APPEND, _SUBTRACT = 0, 1, 2, 3


async def alter_broker_configs(context: KafkaContext, resource: Any, *, incremental: bool,
                               validate_only: bool) -> tuple[ErrorCode, str | None]:
    """Check and apply one broker resource's changes: (error code, message)."""
    dynamic = context.dynamic_configs
    if dynamic is None:
        return ErrorCode.invalid_request, "this broker serves no dynamic configs"
    node_id = context.nodes.this_node().node_id if context.nodes is not None else NODE_ID
    scope = resource.resource_name
    if scope not in ("", str(node_id)):
        return (ErrorCode.invalid_request, f"unexpected broker id {scope!r}: this broker is "
                f"{node_id} (send a broker's configs to that broker, or \"\" for every broker)")
    sets: dict[str, str] = {}
    deletes: list[str] = []
    try:
        for entry in resource.configs:
            operation = entry.config_operation if incremental else _SET
            if operation == _DELETE:
                deletes.append(canonical_key(entry.name))
                continue
            if operation in (_APPEND, _SUBTRACT):
                canonical_key(entry.name)  # an unknown key first: INVALID_REQUEST
                raise InvalidConfigError(
                    f"{'APPEND' if operation == _APPEND else 'SUBTRACT'} is not allowed for "
                    f"{entry.name!r}: it is not a list config")
            if operation != _SET:
                raise InvalidConfigError(f"config operation {operation} of {entry.name!r} is "
                                         "not one of SET, DELETE, APPEND, SUBTRACT")
            if entry.value is None:
                raise InvalidConfigError(f"SET of {entry.name!r} without a value (DELETE "
                                         "puts a config back to its default)")
            key, value = check_config(entry.name, entry.value)
            sets[key] = value
    except NotDynamicError as error:
        return ErrorCode.invalid_request, str(error)
    except InvalidConfigError as error:
        return ErrorCode.invalid_config, str(error)
    if validate_only:
        return ErrorCode.none, None
    try:
        await dynamic.change(lambda table: table.changed(scope, sets, deletes,
                                                         replace=not incremental))
    except LedgerError as error:
        return error_code(error), str(error)
    return ErrorCode.none, None
