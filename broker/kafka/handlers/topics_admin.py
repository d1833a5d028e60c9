"""CreateTopics (key 19) v2-v7 and DeleteTopics (key 20) v1-v6: topics made and removed.

CreateTopics makes a Folio topic of ``num_partitions`` segments (-1: the
broker's ``kafka_num_partitions``, Kafka's ``num.partitions``) with equal key
ranges; partitions are the segments by number. Folio keeps Qw copies of every
entry (the ledgers' write quorum, a broker setting, not per topic), so the
replication factor is a floor checked against it: -1 (the default) or 1 to
Qw is accepted and answered as Qw, more is INVALID_REPLICATION_FACTOR (as a
Kafka broker answers a factor above its broker count), as is 0 or below -1.
Manual replica assignments are refused (INVALID_REQUEST). Topic configs map
onto Folio's topic config (``broker.kafka.topic_configs``); others are
INVALID_CONFIG. CreateTopics v7 answers each topic made with its topic id
(KIP-516), the one its record holds and Metadata reports; nothing made (an
error, or ``validate_only``), the zero id. DeleteTopics deletes the topic, its
segments and ledgers; v6 names each topic by name or by id (``_targets``, as
Kafka's controller reads them: INVALID_REQUEST for both or neither, for a name
or an id given twice, and for a topic asked by its name and its id:
``_resolved``), answers each with its name and id, and an id no
topic has with UNKNOWN_TOPIC_ID. An id the role may not see is UNKNOWN_TOPIC_ID
too (as Metadata by id answers, so ids do not tell which topics exist); one it
may see but not administer is TOPIC_AUTHORIZATION_FAILED with its name.

Both count the partitions made or removed against the client's controller
mutation quota (``broker.kafka.quotas.mutations``, KIP-599): from CreateTopics
v6 and DeleteTopics v5 (the versions that add nothing else) a topic over it
is refused with THROTTLING_QUOTA_EXCEEDED; older versions are served and
throttled. CreatePartitions does the same from v3 (``partitions_admin``).
"""

from __future__ import annotations

import datetime
import uuid
from dataclasses import replace
from typing import Any

from kio.schema.errors import ErrorCode

from broker.api import TopicConfig
from broker.errors import BrokerError, InvalidArgumentError, TopicExistsError, TopicNotFoundError
from broker.kafka.access import TOPIC_ADMIN, TOPIC_LOOKUP, allowed
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
#: DeleteTopics names topics by name or id from this version (KIP-516).
_DELETE_BY_ID = 6
#: Kafka's "no topic id".
_NO_TOPIC_ID = uuid.UUID(int=0)
#: A topic's answer: its code and message (None: none).
_Outcome = tuple[ErrorCode, str | None]


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
        topic_id = None
        if allowed(context, call, TOPIC_ADMIN, topic.name):
            code, message, topic_id = await _create(context, topic, validate_only, quota)
        else:
            code, message = TOPIC_ADMIN.refused, f"admin permission on topic {topic.name!r} needed"
        made = code is ErrorCode.none
        if topic_id is not None:
            context.topic_ids.note(topic.name, topic_id)  # for Fetch v13+ by id
        # What was made, as Kafka answers (v5+): -1 for both when nothing was; its id (v7+).
        results.append(build(result_cls, name=topic.name, error_code=code,
                             error_message=message, topic_config_error_code=ErrorCode.none,
                             topic_id=topic_id or _NO_TOPIC_ID,
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
                  quota: MutationQuota) -> tuple[ErrorCode, str | None, uuid.UUID | None]:
    """The topic made (its id), or why not (no id)."""
    checked = _checked(context, topic)
    if not isinstance(checked, TopicConfig):
        return *checked, None
    try:
        if validate_only:  # takes no tokens, as in Kafka
            return ErrorCode.none, None, None
        if quota.bounded and await _exists(context, topic.name):
            # As Kafka, which finds it before the quota: an existing topic takes no tokens.
            raise TopicExistsError(topic.name)
        if not quota.admit(_count(context, topic)):
            return ErrorCode.throttling_quota_exceeded, THROTTLING_MESSAGE, None
        info = await context.topics.create_topic(topic.name, _count(context, topic), checked)
    except (BrokerError, LedgerError) as error:
        return error_code(error), str(error), None
    # (A record without an id is of an earlier build; none is made so now.)
    return ErrorCode.none, None, uuid.UUID(info.topic_id) if info.topic_id else None


def _checked(context: KafkaContext, topic: Any) -> TopicConfig | _Outcome:
    """``topic``'s config if it may be made as asked (name, assignments, factor, count,
    configs), else why not."""
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
        return replace(context.topics.default_config(), **changes)
    except UnknownConfigError as error:
        return ErrorCode.invalid_config, str(error)
    except ValueError as error:
        return ErrorCode.invalid_config, str(error)


async def _exists(context: KafkaContext, name: str) -> bool:
    try:
        await context.topics.get_topic(name)
    except TopicNotFoundError:
        return False
    return True


async def handle_delete_topics(context: KafkaContext, call: Call) -> Any:
    """Delete each topic named (v6: by name or by id)."""
    cls = response_class(DELETE_TOPICS_KEY, call.version)
    result_cls = nested(cls, "DeletableTopicResult")
    quota = mutation_quota(context, call, _STRICT_DELETE)
    if call.version >= _DELETE_BY_ID:
        targets = await _resolved(context, call, _targets(call.request.topics))
    else:
        targets = [(name, None, None) for name in call.request.topic_names]
    results = []
    for name, asked_id, refused in targets:
        topic_id, outcome = asked_id, refused
        if refused is None and name is not None:
            topic_id, outcome = await _delete(context, call, quota, name, asked_id)
        code, message = outcome or (ErrorCode.none, None)
        results.append(build(result_cls, name=name, error_code=code, error_message=message,
                             topic_id=topic_id or _NO_TOPIC_ID))
    return build(cls, throttle_time=quota.throttle_time(), responses=tuple(results))


#: A topic to delete as asked: (name, id, refusal); the refusal None: go on.
_Target = tuple[str | None, uuid.UUID | None, _Outcome | None]
_UNKNOWN_ID = (ErrorCode.unknown_topic_id, "This server does not host this topic ID.")
_NAME_OF_AN_ID = (ErrorCode.invalid_request,
                  "The provided topic name maps to an ID that was already supplied.")


def _targets(topics: Any) -> list[_Target]:
    """DeleteTopics v6's entries as Kafka's controller reads them.

    Each names a topic by name or by id (the zero id: none): both or neither is
    INVALID_REQUEST, and so is a name or an id given twice (answered once).
    """
    targets: list[_Target] = []
    seen: dict[str | uuid.UUID, int] = {}
    for topic in topics:
        topic_id = None if topic.topic_id in (None, _NO_TOPIC_ID) else topic.topic_id
        key: str | uuid.UUID | None = topic.name if topic_id is None else topic_id
        if topic.name is None and topic_id is None:
            targets.append((None, None, (ErrorCode.invalid_request,
                                         "Neither topic name nor id were specified.")))
        elif topic.name is not None and topic_id is not None:
            targets.append((topic.name, topic_id, (
                ErrorCode.invalid_request, "You may not specify both topic name and topic id.")))
        elif key is not None and key in seen:
            first = seen[key]
            if targets[first][2] is None:  # answered once, at its first place
                what = "name" if topic_id is None else "id"
                targets[first] = (*targets[first][:2],
                                  (ErrorCode.invalid_request, f"Duplicate topic {what}."))
        elif key is not None:
            seen[key] = len(targets)
            targets.append((topic.name, topic_id, None))
    return targets


async def _resolved(context: KafkaContext, call: Call,
                    targets: list[_Target]) -> list[_Target]:
    """Each id asked resolved to the name of its topic, before anything is deleted.

    An id no topic has, or one of a topic the role may not see, is
    UNKNOWN_TOPIC_ID. A name asked whose topic is also asked by its id is
    INVALID_REQUEST, both entries, and neither deleted (Kafka answers the name
    so and leaves the id out of its answer; every entry is answered here).
    """
    resolved: list[_Target] = []
    for name, topic_id, refused in targets:
        if refused is None and name is None and topic_id is not None:
            try:
                found = await context.topic_ids.resolve(context.topics, topic_id)
            except (BrokerError, LedgerError) as error:
                resolved.append((None, topic_id, (error_code(error), str(error))))
                continue
            if found is None or not allowed(context, call, TOPIC_LOOKUP, found):
                resolved.append((None, topic_id, _UNKNOWN_ID))
                continue
            resolved.append((found, topic_id, None))
        else:
            resolved.append((name, topic_id, refused))
    by_id = {name: topic_id for (name, topic_id, refused), asked
             in zip(resolved, targets, strict=True) if refused is None and asked[0] is None}
    named = {name for name, _, refused in targets if refused is None and name is not None}
    return [(name, by_id[name], _NAME_OF_AN_ID) if refused is None and name in named
            and name in by_id else (name, topic_id, refused)
            for name, topic_id, refused in resolved]


async def _delete(context: KafkaContext, call: Call, quota: MutationQuota, name: str,
                  topic_id: uuid.UUID | None) -> tuple[uuid.UUID | None, _Outcome | None]:
    """Delete topic ``name``: (its id (v6), refusal or None).

    A topic asked by id is deleted by the name its id resolved to
    (``_resolved``). Window: a topic deleted and made again under that name
    between the two is deleted in its place (topics are deleted by name);
    the answer then names the id asked.
    """
    try:
        if not allowed(context, call, TOPIC_ADMIN, name):
            return topic_id, (TOPIC_ADMIN.refused, f"admin permission on topic {name!r} needed")
        if topic_id is None and call.version >= _DELETE_BY_ID:
            topic_id = uuid.UUID(await context.topics.topic_id(name))
        if quota.bounded and not quota.admit(
                len(await partition_segments(context.topics, name))):
            return topic_id, (ErrorCode.throttling_quota_exceeded, THROTTLING_MESSAGE)
        await context.topics.delete_topic(name)
    except (BrokerError, LedgerError) as error:
        return topic_id, (error_code(error), str(error))
    return topic_id, None


ROWS = (
    Api(CREATE_TOPICS_KEY, "CreateTopics", 2, 7, handle_create_topics),
    Api(DELETE_TOPICS_KEY, "DeleteTopics", 1, 6, handle_delete_topics),
)
