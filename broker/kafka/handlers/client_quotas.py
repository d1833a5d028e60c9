"""DescribeClientQuotas (key 48) and AlterClientQuotas (key 49), v0-v1: the cluster's client quotas.

They read and change the quota table in the metadata store
(``broker.kafka.quotas.store``): what one broker changes, every broker
enforces (``broker.kafka.quotas.enforcer``). The rules are Kafka's (KIP-546,
``broker.kafka.quotas.table``): entities of ``user`` and/or ``client-id``
(a name, or null: the default) with keys ``producer_byte_rate``,
``consumer_byte_rate``, ``request_percentage`` and
``controller_mutation_rate``, or of an ``ip`` alone (an address or the
default) with ``connection_creation_rate``; anything else is refused with
INVALID_REQUEST, as Kafka refuses it. Each entry of an AlterClientQuotas is answered on its own;
the valid ones are applied together in one compare-and-set, or, with
``validate_only``, only checked. An entity named twice in one request is
refused (INVALID_REQUEST) in each place. The store not answering is the
retriable REQUEST_TIMED_OUT for every valid entry (maybe applied: a retry
sets the same values again).

DescribeClientQuotas reads this broker's copy of the table (kept current by
a watch; a change made through another broker shows here once the watch has
fired, a moment later). A filter Kafka refuses is refused with its code:
INVALID_REQUEST, or UNSUPPORTED_VERSION for an unknown entity type.

Who may call them: Kafka asks DESCRIBE_CONFIGS / ALTER_CONFIGS on the
cluster; here, with token authentication, the cluster row of
``broker.kafka.access.KAFKA_TABLE`` (super-users; CLUSTER_AUTHORIZATION_FAILED
otherwise); without it, anyone who can reach the port, as every admin API.
"""

from __future__ import annotations

import datetime
import logging
from typing import Any

from kio.schema.errors import ErrorCode

from broker.kafka.access import CLUSTER, allowed
from broker.kafka.context import KafkaContext
from broker.kafka.dispatch import Api, Call
from broker.kafka.messages import build, nested, response_class
from broker.kafka.quotas.table import (
    Entity,
    Filter,
    QuotaError,
    QuotaTable,
    check_entity,
    check_ops,
)
from ledger.errors import LedgerError

__all__ = ["ALTER_KEY", "DESCRIBE_KEY", "ROWS"]

log = logging.getLogger(__name__)

DESCRIBE_KEY = 48
ALTER_KEY = 49
_ZERO = datetime.timedelta(0)


def _refusal(context: KafkaContext, call: Call) -> tuple[ErrorCode, str] | None:
    if context.quota_store is None:
        return ErrorCode.unsupported_version, "client quotas are not served here"
    if not allowed(context, call, CLUSTER, ""):
        return CLUSTER.refused, "only super-users may describe or alter client quotas"
    return None


async def handle_describe(context: KafkaContext, call: Call) -> Any:
    """The entities the filter matches, with their quota values."""
    cls = response_class(DESCRIBE_KEY, call.version)
    entry_cls = nested(cls, "EntryData")
    entity_cls = nested(cls, "EntityData")
    value_cls = nested(cls, "ValueData")
    refused = _refusal(context, call)
    store = context.quota_store
    if refused is None and store is not None:
        request = call.request
        try:
            wanted = Filter.of(((c.entity_type, int(c.match_type), c.match)
                                for c in request.components), bool(request.strict))
        except QuotaError as error:
            refused = (error.code, error.message)
    if refused is not None or store is None:
        code, message = refused or (ErrorCode.unsupported_version, None)
        return build(cls, throttle_time=_ZERO, error_code=code, error_message=message,
                     entries=None)
    found = store.table.describe(wanted)
    entries = tuple(
        build(entry_cls,
              entity=tuple(build(entity_cls, entity_type=entity_type, entity_name=name)
                           for entity_type, name in entity),
              values=tuple(build(value_cls, key=key, value=value)
                           for key, value in sorted(values.items())))
        for entity, values in found)
    return build(cls, throttle_time=_ZERO, error_code=ErrorCode.none, error_message=None,
                 entries=entries)


async def handle_alter(context: KafkaContext, call: Call) -> Any:
    """Check each entry; apply the valid ones in one compare-and-set (see the module doc)."""
    cls = response_class(ALTER_KEY, call.version)
    entry_cls = nested(cls, "EntryData")
    entity_cls = nested(cls, "EntityData")
    request = call.request
    refused = _refusal(context, call)
    outcomes: list[tuple[ErrorCode, str | None]] = []
    valid: dict[Entity, dict[str, float | None]] = {}
    if refused is None:
        assert context.quota_store is not None  # _refusal checked it
        outcomes, valid = _checked(request.entries)
        if valid and not request.validate_only:
            changes = valid

            def edit(table: QuotaTable) -> QuotaTable:
                for entity, entity_changes in changes.items():
                    table = table.altered(entity, entity_changes)
                return table

            try:
                await context.quota_store.change(edit)
            except LedgerError as error:
                # Unknown outcome: maybe applied; the client's retry sets the same values.
                log.warning("kafka: AlterClientQuotas: the metadata store did not answer: %s",
                            error)
                timed_out = (ErrorCode.request_timed_out,
                             f"the metadata store did not answer: {error}")
                outcomes = [timed_out if code is ErrorCode.none else (code, message)
                            for code, message in outcomes]
    else:
        outcomes = [refused] * len(request.entries)
    return build(cls, throttle_time=_ZERO, entries=tuple(
        build(entry_cls, error_code=code, error_message=message,
              entity=tuple(build(entity_cls, entity_type=e.entity_type,
                                 entity_name=e.entity_name) for e in entry.entity))
        for entry, (code, message) in zip(request.entries, outcomes, strict=True)))


def _checked(entries: Any) -> tuple[list[tuple[ErrorCode, str | None]],
                                    dict[Entity, dict[str, float | None]]]:
    """Each entry's outcome if valid (NONE) or not, and the valid entities' changes."""
    outcomes: list[tuple[ErrorCode, str | None]] = []
    valid: dict[Entity, dict[str, float | None]] = {}
    named: list[Entity | None] = []
    for entry in entries:
        try:
            entity = check_entity((e.entity_type, e.entity_name) for e in entry.entity)
            changes = check_ops(((op.key, float(op.value), bool(op.remove)) for op in entry.ops),
                                entity)
        except QuotaError as error:
            outcomes.append((error.code, error.message))
            named.append(None)
            continue
        outcomes.append((ErrorCode.none, None))
        named.append(entity)
        valid[entity] = changes
    for index, maybe in enumerate(named):
        if maybe is not None and named.count(maybe) > 1:
            outcomes[index] = (ErrorCode.invalid_request,
                               f"entity {_text(maybe)} is named more than once")
            valid.pop(maybe, None)
    return outcomes, valid


def _text(entity: Entity) -> str:
    return ", ".join(f"{entity_type}={'<default>' if name is None else name}"
                     for entity_type, name in entity)


ROWS = (
    Api(DESCRIBE_KEY, "DescribeClientQuotas", 0, 1, handle_describe),
    Api(ALTER_KEY, "AlterClientQuotas", 0, 1, handle_alter),
)
