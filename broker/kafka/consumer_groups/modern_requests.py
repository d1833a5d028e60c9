"""What a ConsumerGroupHeartbeat asks and answers, its checks, the protocol's settings.

Pure data and functions for ``broker.kafka.consumer_groups.modern``: the
request as the handler decodes it (topics by name), Kafka's request checks
(``check_request``: INVALID_REQUEST with Kafka's messages, UNSUPPORTED_ASSIGNOR,
INVALID_GROUP_ID, INVALID_REGULAR_EXPRESSION), the answer; and what the
coordinator needs of the rest of the broker (the classic groups, the group
records, partition counts, topic names).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from kio.schema.errors import ErrorCode

from broker.api import Topics
from broker.kafka.consumer_groups.assignors import ASSIGNORS
from broker.kafka.consumer_groups.migration import MigrationPolicy
from broker.kafka.consumer_groups.modern_members import (
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    ClassicMetadata,
    Partitions,
)
from broker.kafka.consumer_groups.offsets import ConsumerGroupRecord
from broker.kafka.consumer_groups.topic_regex import check_regex
from broker.kafka.partitions import partition_segments

__all__ = ["ClassicGroups", "GroupRecords", "HeartbeatRequest", "HeartbeatResult",
           "ModernConfig", "PartitionCount", "TopicAllowed", "TopicNames", "check_request",
           "refused", "subset", "topic_names", "topic_partitions"]


@dataclass(frozen=True, slots=True)
class ModernConfig:
    """The consumer protocol's broker settings, with Kafka's defaults.

    Attributes:
        session_timeout_ms: ``group.consumer.session.timeout.ms``.
        heartbeat_interval_ms: ``group.consumer.heartbeat.interval.ms``.
        metadata_refresh_ms: how often a group looks at its topics'
            partition counts again (a split adds partitions).
        max_group_id_bytes: longest group id (UTF-8), as the classic side's.
        migration_policy: ``group.consumer.migration.policy``: whether a group
            with members changes kind (``migration``, ``mixed``).
    """

    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    metadata_refresh_ms: int = 10_000
    max_group_id_bytes: int = 512
    migration_policy: MigrationPolicy = MigrationPolicy.BIDIRECTIONAL

    def __post_init__(self) -> None:
        if not 0 < self.heartbeat_interval_ms < self.session_timeout_ms:
            raise ValueError("need 0 < heartbeat_interval_ms < session_timeout_ms")


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    """A ConsumerGroupHeartbeat, topics by name (the handler maps topic ids)."""

    group_id: str
    member_id: str
    member_epoch: int
    client_id: str = ""
    client_host: str = ""
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed: tuple[str, ...] | None = None
    #: ``SubscribedTopicRegex``: None unchanged, "" none (librdkafka sends "" for none).
    regex: str | None = None
    #: Whether the member may see a topic its regex matches (Kafka's DESCRIBE check).
    topic_allowed: TopicAllowed | None = None
    server_assignor: str | None = None
    owned: Partitions | None = None
    version: int = 1
    #: A classic member's JoinGroup (``mixed``), set on the member before its image is
    #: written; None: a ConsumerGroupHeartbeat (the member speaks the consumer protocol).
    classic: ClassicMetadata | None = None


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    """The answer: an error (with its message), or the member's epoch and maybe assignment."""

    error: ErrorCode
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = -1
    heartbeat_interval_ms: int = 0
    assignment: Partitions | None = None


class ClassicGroups(Protocol):
    """What this side needs of the classic coordinator."""

    def in_use(self, group_id: str) -> bool:
        """Whether ``group_id`` is a classic group with members (or members joining)."""

    def forget_empty(self, group_id: str) -> None:
        """Forget ``group_id``'s Empty classic group (it is a consumer group now)."""


class GroupRecords(Protocol):
    """What this side needs of the ``OffsetStore``: group records, deletion, containers."""

    def group_ids(self) -> set[str]: ...

    def group_record(self, group_id: str) -> ConsumerGroupRecord | None: ...

    def container_of(self, group_id: str) -> int: ...

    async def write_group(self, group_id: str, record: ConsumerGroupRecord) -> None: ...

    async def delete_group(self, group_id: str) -> None: ...


#: A topic's partition count: raises ``TopicNotFoundError`` for a missing one,
#: any ``BrokerError`` or ``LedgerError`` when it cannot be read now.
PartitionCount = Callable[[str], Awaitable[int]]
#: The user topics' names (never a system topic), for regular-expression
#: subscriptions; raises any ``BrokerError`` or ``LedgerError`` when unreadable now.
TopicNames = Callable[[], Awaitable[Iterable[str]]]
#: Whether a member may see a topic (by name).
TopicAllowed = Callable[[str], bool]


def topic_partitions(topics: Topics) -> PartitionCount:
    """``PartitionCount`` over the broker's topics (every segment is a partition)."""
    async def count(topic: str) -> int:
        segments = await partition_segments(topics, topic)
        return max((s.number for s in segments), default=-1) + 1
    return count


def topic_names(topics: Topics) -> TopicNames:
    """``TopicNames`` over the broker's topics (``list_topics`` leaves the system ones out)."""
    async def names() -> list[str]:
        return [topic.name for topic in await topics.list_topics()]
    return names


def refused(code: ErrorCode, message: str) -> HeartbeatResult:
    """A refusal: the error and its message."""
    return HeartbeatResult(code, message)


def check_request(r: HeartbeatRequest, config: ModernConfig) -> HeartbeatResult | None:
    """Kafka's request checks: INVALID_REQUEST, UNSUPPORTED_ASSIGNOR, INVALID_GROUP_ID,
    INVALID_REGULAR_EXPRESSION (``topic_regex``)."""
    if not r.group_id:
        return refused(ErrorCode.invalid_request, "GroupId can't be empty.")
    if len(r.group_id.encode()) > config.max_group_id_bytes:
        return refused(ErrorCode.invalid_group_id, "GroupId is too long.")
    if r.instance_id == "":
        return refused(ErrorCode.invalid_request, "InstanceId can't be empty.")
    why = check_regex(r.regex) if r.regex else None
    if why is not None:
        return refused(ErrorCode.invalid_regular_expression, why)
    if r.member_epoch == 0:
        if r.version >= 1 and not r.member_id:
            return refused(ErrorCode.invalid_request, "MemberId can't be empty.")
        if r.rebalance_timeout_ms == -1:
            return refused(ErrorCode.invalid_request,
                            "RebalanceTimeoutMs must be provided in first request.")
        if r.owned is not None and any(r.owned.values()):  # librdkafka sends null: taken
            return refused(ErrorCode.invalid_request,
                            "TopicPartitions must be empty when (re-)joining.")
        if not r.subscribed and not r.regex:
            return refused(ErrorCode.invalid_request, "SubscribedTopicNames or "
                            "SubscribedTopicRegex must be set in first request.")
    elif r.member_epoch > 0 or r.member_epoch == LEAVE_EPOCH:
        if not r.member_id:
            return refused(ErrorCode.invalid_request, "MemberId can't be empty.")
    elif r.member_epoch == STATIC_LEAVE_EPOCH:
        if not r.member_id or r.instance_id is None:
            return refused(ErrorCode.invalid_request,
                            "MemberId and InstanceId are needed to leave as a static member.")
    else:
        return refused(ErrorCode.invalid_request, "MemberEpoch is invalid.")
    if r.server_assignor is not None and r.server_assignor not in ASSIGNORS:
        return refused(ErrorCode.unsupported_assignor,
                        f"ServerAssignor {r.server_assignor} is not supported. Supported "
                        f"assignors: {', '.join(sorted(ASSIGNORS))}.")
    return None


def subset(owned: Partitions | None, assigned: Partitions) -> bool:
    """Whether every partition ``owned`` reports is in ``assigned`` (None: no)."""
    if owned is None:
        return False
    return all(numbers <= assigned.get(topic, set()) for topic, numbers in owned.items())
