"""CreateTopics (key 19) v2-v6 and DeleteTopics (key 20) v1-v5: topics made and removed.

CreateTopics makes a Folio topic of ``num_partitions`` segments (-1: the
broker's ``kafka_num_partitions``, Kafka's ``num.partitions``) with equal key
ranges; partitions are the segments by number. Folio keeps Qw copies of every
entry (the ledgers' write quorum, a broker setting, not per topic), so the
replication factor is a floor checked against it: -1 (the default) or 1 to
Qw is accepted and answered as Qw, more is INVALID_REPLICATION_FACTOR (as a
Kafka broker answers a factor above its broker count), as is 0 or below -1.
Manual replica assignments are refused (INVALID_REQUEST). Topic configs map
onto Folio's topic config (``broker.kafka.topic_configs``); others are
INVALID_CONFIG. DeleteTopics
deletes the topic, its segments and ledgers.

Both count the partitions made or removed against the client's controller
mutation quota (``broker.kafka.quotas.mutations``, KIP-599): from CreateTopics
v6 and DeleteTopics v5 (the versions that add nothing else) a topic over it
is refused with THROTTLING_QUOTA_EXCEEDED; older versions are served and
throttled. CreatePartitions does the same from v3 (``partitions_admin``).
"""

from __future__ import annotations

import datetime
from dataclasses import replace
from typing import Any

from kio.schema.errors import ErrorCode

from broker.errors import BrokerError, InvalidArgumentError, TopicExistsError, TopicNotFoundError
from broker.kafka.access import TOPIC_ADMIN, allowed
from broker.kafka.context import KafkaContext
from broker.kafka.dispatch import Api, Call
from broker.kafka.error_codes import error_code
from broker.kafka.messages import build, nested, response_class
from broker.kafka.partitions import partition_segments
from broker.kafka.quotas.mutations import THROTTLING_MESSAGE, MutationQuota
from broker.kafka.topic_configs import UnknownConfigError, config_changes
from broker.segments.names import check_topic_name
from broker.topics.manager import MAX_SEGMENT_COUNT
from ledger.errors import LedgerError

__all__ = ["CREATE_TOPICS_KEY", "DELETE_TOPICS_KEY", "ROWS", "mutation_quota"]

CREATE_TOPICS_KEY = 19
DELETE_TOPICS_KEY = 20
_ZERO = datetime.timedelta(0)
#: The first versions whose clients know THROTTLING_QUOTA_EXCEEDED (KIP-599).
_STRICT_CREATE = 6
_STRICT_DELETE = 5


def mutation_quota(context: KafkaContext, call: Call, strict_since: int) -> MutationQuota:
    """The controller mutation quota of ``call``: strict from ``strict_since`` on."""
    if context.quotas is None:
        return MutationQuota()
    return context.quotas.mutations.quota(
        None if call.principal is None else call.principal.role, call.client_id,
        call.version >= strict_since)


async def handle_create_topics(context: KafkaContext, call: Call) -> Any:
    """Create each topic asked (or only check, with ``validate_only``)."""
    cls = response_class(CREATE_TOPICS_KEY, call.version)
    result_cls = nested(cls, "CreatableTopicResult")
    validate_only = bool(getattr(call.request, "validate_only", False))
    quota = mutation_quota(context, call, _STRICT_CREATE)
    results = []
    for topic in call.request.topics:
        if allowed(context, call, TOPIC_ADMIN, topic.name):
            code, message = await _create(context, topic, validate_only, quota)
        else:
            code, message = TOPIC_ADMIN.refused, f"admin permission on topic {topic.name!r} needed"
        made = code is ErrorCode.none
        # What was made, as Kafka answers (v5+): -1 for both when nothing was.
        results.append(build(result_cls, name=topic.name, error_code=code,
                             error_message=message, topic_config_error_code=ErrorCode.none,
                             num_partitions=_count(context, topic) if made else -1,
                             replication_factor=context.write_quorum if made else -1,
                             configs=()))
    return build(cls, throttle_time=quota.throttle_time(), topics=tuple(results))


def _count(context: KafkaContext, topic: Any) -> int:
    return context.num_partitions if topic.num_partitions == -1 else int(topic.num_partitions)


def _replication_error(context: KafkaContext, factor: int) -> str | None:
    """Why ``factor`` cannot be honoured (None: it can: -1, or 1 to Qw)."""
    if factor == -1 or 1 <= factor <= context.write_quorum:
        return None
    if factor < 1:
        return "replication factor must be larger than 0, or -1 to use the default"
    return (f"replication factor {factor} is more than the {context.write_quorum} "
            f"copies Folio keeps of every entry (the ledgers' write quorum Qw, a broker "
            f"setting, not per topic): use -1 or 1 to {context.write_quorum}")


async def _create(context: KafkaContext, topic: Any, validate_only: bool,
                  quota: MutationQuota) -> tuple[ErrorCode, str | None]:
    count = _count(context, topic)
    try:
        check_topic_name(topic.name)  # first, as Kafka checks it
    except InvalidArgumentError as error:
        return error_code(error), str(error)
    if topic.assignments:
        return ErrorCode.invalid_request, "manual replica assignments are not supported"
    refused = _replication_error(context, int(topic.replication_factor))
    if refused is not None:
        return ErrorCode.invalid_replication_factor, refused
    if not 1 <= count <= MAX_SEGMENT_COUNT:
        return (ErrorCode.invalid_partitions,
                f"num_partitions must be in [1, {MAX_SEGMENT_COUNT}], got {count}")
    try:
        changes = config_changes({entry.name: entry.value for entry in topic.configs})
        config = replace(context.topics.default_config(), **changes)
    except UnknownConfigError as error:
        return ErrorCode.invalid_config, str(error)
    except ValueError as error:
        return ErrorCode.invalid_config, str(error)
    try:
        if validate_only:  # takes no tokens, as in Kafka
            return ErrorCode.none, None
        if quota.bounded and await _exists(context, topic.name):
            # As Kafka, which finds it before the quota: an existing topic takes no tokens.
            raise TopicExistsError(topic.name)
        if not quota.admit(count):
            return ErrorCode.throttling_quota_exceeded, THROTTLING_MESSAGE
        await context.topics.create_topic(topic.name, count, config)
    except InvalidArgumentError as error:
        return error_code(error), str(error)
    except (BrokerError, LedgerError) as error:
        return error_code(error), str(error)
    return ErrorCode.none, None


async def _exists(context: KafkaContext, name: str) -> bool:
    try:
        await context.topics.get_topic(name)
    except TopicNotFoundError:
        return False
    return True


async def handle_delete_topics(context: KafkaContext, call: Call) -> Any:
    """Delete each topic named."""
    cls = response_class(DELETE_TOPICS_KEY, call.version)
    result_cls = nested(cls, "DeletableTopicResult")
    quota = mutation_quota(context, call, _STRICT_DELETE)
    results = []
    for name in call.request.topic_names:
        code = ErrorCode.none
        message = None
        try:
            if not allowed(context, call, TOPIC_ADMIN, name):
                code, message = TOPIC_ADMIN.refused, f"admin permission on topic {name!r} needed"
            elif quota.bounded and not quota.admit(
                    len(await partition_segments(context.topics, name))):
                code, message = ErrorCode.throttling_quota_exceeded, THROTTLING_MESSAGE
            else:
                await context.topics.delete_topic(name)
        except (BrokerError, LedgerError) as error:
            code, message = error_code(error), str(error)
        results.append(build(result_cls, name=name, error_code=code, error_message=message,
                             topic_id=None))
    return build(cls, throttle_time=quota.throttle_time(), responses=tuple(results))


ROWS = (
    Api(CREATE_TOPICS_KEY, "CreateTopics", 2, 6, handle_create_topics),
    Api(DELETE_TOPICS_KEY, "DeleteTopics", 1, 5, handle_delete_topics),
)
