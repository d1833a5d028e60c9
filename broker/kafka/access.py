"""Who may do what through Kafka: THE table of each API's permissions, and the check.

Kafka's ACL model names four resource types; each maps onto Folio's grants
(``broker.auth.permissions``) and is checked by the same transport-neutral
``broker.auth.access.Access`` as the gRPC rows, so a grant means the same on
both ports:

- a **topic** is a Folio topic: Kafka's Write is ``produce``, Read
  ``consume``, Describe any permission, Create/Delete/Alter ``admin``;
- a **group** is a Folio group-kind resource: Read is ``consume``,
  Describe any permission, Delete ``admin``;
- a **transactional id** is a group-kind resource of the same name with
  ``produce`` (Kafka's Write on TransactionalId): both are coordinator keys a
  client names, and a group grant of ``consume`` never lets a role use the
  name as a transactional id, nor ``produce`` join it as a consumer group;
- the **cluster**: Folio grants none; super-users have it. IdempotentWrite
  is granted by ``produce`` on any topic (as Kafka 3's KIP-679 does).

``KAFKA_TABLE`` lists, per served API, what it needs; the handlers check the
rows they name (``allowed``), and ``tests/integration/kafka/test_kafka_access.py``
calls every row over a real socket with and without the permission.

``KafkaContext.authorizer`` None means no authorisation (a broker without
token authentication): everything is allowed, as before. With it, a call
whose connection authenticated no one (``call.principal`` None) has no role
and is refused what needs a permission.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import Enum
from typing import Final

from kio.schema.errors import ErrorCode

from broker.auth.access import Need
from broker.auth.permissions import Action, ResourceKind
from broker.kafka.context import KafkaContext
from broker.kafka.dispatch import Call

__all__ = ["KAFKA_TABLE", "KafkaResource", "Requirement", "allowed", "may_produce_somewhere",
           "role_of"]

log = logging.getLogger(__name__)


class KafkaResource(Enum):
    """Kafka's resource types (as its ACLs name them) that the rows check."""

    TOPIC = "topic"
    GROUP = "group"
    TRANSACTIONAL_ID = "transactional-id"
    CLUSTER = "cluster"


#: The Kafka error a refusal on each resource type answers.
_REFUSED: Final = {
    KafkaResource.TOPIC: ErrorCode.topic_authorization_failed,
    KafkaResource.GROUP: ErrorCode.group_authorization_failed,
    KafkaResource.TRANSACTIONAL_ID: ErrorCode.transactional_id_authorization_failed,
    KafkaResource.CLUSTER: ErrorCode.cluster_authorization_failed,
}

#: The Folio resource kind each Kafka resource type is granted on.
_KIND: Final = {
    KafkaResource.TOPIC: ResourceKind.TOPIC,
    KafkaResource.GROUP: ResourceKind.GROUP,
    KafkaResource.TRANSACTIONAL_ID: ResourceKind.GROUP,
    KafkaResource.CLUSTER: ResourceKind.TOPIC,  # unused: the cluster needs a super-user
}


@dataclass(frozen=True, slots=True)
class Requirement:
    """One check of a row: ``need`` on the ``resource`` named in the request."""

    need: Need
    resource: KafkaResource
    #: What in the request names it (for the docs and the tests).
    what: str = ""

    @property
    def refused(self) -> ErrorCode:
        """The Kafka error code answered when the role lacks it."""
        return _REFUSED[self.resource]


TOPIC_PRODUCE: Final = Requirement(Need.PRODUCE, KafkaResource.TOPIC, "each topic written")
TOPIC_CONSUME: Final = Requirement(Need.CONSUME, KafkaResource.TOPIC, "each topic read")
TOPIC_LOOKUP: Final = Requirement(Need.LOOKUP, KafkaResource.TOPIC, "each topic described")
TOPIC_ADMIN: Final = Requirement(Need.ADMIN, KafkaResource.TOPIC, "each topic")
GROUP_CONSUME: Final = Requirement(Need.CONSUME, KafkaResource.GROUP, "the group")
GROUP_LOOKUP: Final = Requirement(Need.LOOKUP, KafkaResource.GROUP, "the group")
GROUP_ADMIN: Final = Requirement(Need.ADMIN, KafkaResource.GROUP, "each group")
TXN_PRODUCE: Final = Requirement(Need.PRODUCE, KafkaResource.TRANSACTIONAL_ID,
                                 "the transactional id")
#: IdempotentWrite: ``produce`` on any one topic (checked by ``may_produce_somewhere``).
IDEMPOTENT: Final = Requirement(Need.PRODUCE, KafkaResource.CLUSTER, "produce on any topic")
CLUSTER: Final = Requirement(Need.SUPER_USER, KafkaResource.CLUSTER, "the cluster")
ACL_ADMIN: Final = Requirement(Need.ADMIN, KafkaResource.CLUSTER,
                               "admin covering each ACL's topic or group pattern")

#: Every served API (by its dispatch row's name) and what it checks. Lists
#: (ListGroups, Metadata of all topics) show only what the role may see.
KAFKA_TABLE: Final[dict[str, tuple[Requirement, ...]]] = {
    "ApiVersions": (),
    "Produce": (TOPIC_PRODUCE, TXN_PRODUCE),
    "Fetch": (TOPIC_CONSUME,),
    "ListOffsets": (TOPIC_CONSUME,),
    "OffsetForLeaderEpoch": (TOPIC_LOOKUP,),
    "Metadata": (TOPIC_LOOKUP,),
    "DescribeTopicPartitions": (TOPIC_LOOKUP,),
    "OffsetCommit": (GROUP_CONSUME, TOPIC_CONSUME),
    "OffsetFetch": (GROUP_CONSUME, TOPIC_CONSUME),
    "FindCoordinator": (GROUP_LOOKUP, TXN_PRODUCE),
    "JoinGroup": (GROUP_CONSUME,),
    "Heartbeat": (GROUP_CONSUME,),
    "LeaveGroup": (GROUP_CONSUME,),
    "SyncGroup": (GROUP_CONSUME,),
    "DescribeGroups": (GROUP_LOOKUP,),
    "ConsumerGroupHeartbeat": (GROUP_CONSUME, TOPIC_LOOKUP),
    "ConsumerGroupDescribe": (GROUP_LOOKUP,),
    "ShareGroupHeartbeat": (GROUP_CONSUME, TOPIC_LOOKUP),
    "ShareGroupDescribe": (GROUP_LOOKUP,),
    # Their handlers check TOPIC_CONSUME per partition too; a share request names
    # topics by id only, so the permission test calls that check in a test of its
    # own (``test_kafka_access.test_share_fetch_refuses_a_topic_not_consumable``).
    "ShareFetch": (GROUP_CONSUME,),
    "ShareAcknowledge": (GROUP_CONSUME,),
    "DescribeShareGroupOffsets": (GROUP_LOOKUP, TOPIC_LOOKUP),
    "AlterShareGroupOffsets": (GROUP_CONSUME, TOPIC_CONSUME),
    "DeleteShareGroupOffsets": (GROUP_ADMIN, TOPIC_CONSUME),
    "ListGroups": (),
    "CreateTopics": (TOPIC_ADMIN,),
    "DeleteTopics": (TOPIC_ADMIN,),
    "InitProducerId": (TXN_PRODUCE, IDEMPOTENT),
    # v4+ (the form Kafka's brokers send, KIP-890) needs CLUSTER instead, checked
    # by its handler (``broker.kafka.handlers.transactions``).
    "AddPartitionsToTxn": (TXN_PRODUCE, TOPIC_PRODUCE),
    "AddOffsetsToTxn": (TXN_PRODUCE, GROUP_CONSUME),
    "EndTxn": (TXN_PRODUCE,),
    "TxnOffsetCommit": (GROUP_CONSUME, TOPIC_CONSUME),
    "DescribeAcls": (CLUSTER,),
    "CreateAcls": (ACL_ADMIN,),
    "DeleteAcls": (ACL_ADMIN,),
    "DescribeConfigs": (TOPIC_LOOKUP, CLUSTER, GROUP_LOOKUP),
    "DeleteGroups": (GROUP_ADMIN,),
    # Authentication itself needs nothing (it is what gives the role);
    # SCRAM credentials are the cluster's: super-users only.
    "SaslHandshake": (),
    "SaslAuthenticate": (),
    "DescribeUserScramCredentials": (CLUSTER,),
    "AlterUserScramCredentials": (CLUSTER,),
    # Delegation tokens: their owner's, renewers' and (another owner's, all
    # tokens) the super-users' (``broker.kafka.handlers.delegation_tokens``).
    "CreateDelegationToken": (),
    "RenewDelegationToken": (),
    "ExpireDelegationToken": (),
    "DescribeDelegationToken": (),
    # Admin APIs (docs/kafka.md, "Admin APIs"), as Kafka checks them.
    "DescribeCluster": (),
    "DescribeLogDirs": (CLUSTER,),
    "AlterConfigs": (TOPIC_ADMIN, CLUSTER, GROUP_ADMIN),
    "IncrementalAlterConfigs": (TOPIC_ADMIN, CLUSTER, GROUP_ADMIN),
    "CreatePartitions": (TOPIC_ADMIN,),
    "DeleteRecords": (TOPIC_ADMIN,),
    "OffsetDelete": (GROUP_ADMIN, TOPIC_CONSUME),
    "DescribeProducers": (TOPIC_CONSUME,),
    "DescribeTransactions": (TXN_PRODUCE,),
    "ListTransactions": (),
    "ElectLeaders": (CLUSTER,),
    "ListPartitionReassignments": (CLUSTER,),
    "AlterPartitionReassignments": (CLUSTER,),
    # Kafka: DESCRIBE_CONFIGS / ALTER_CONFIGS on the cluster.
    "DescribeClientQuotas": (CLUSTER,),
    "AlterClientQuotas": (CLUSTER,),
}


def role_of(call: Call) -> str | None:
    """The call's role; None when its connection authenticated no one."""
    return None if call.principal is None else call.principal.role


def allowed(context: KafkaContext, call: Call, requirement: Requirement, name: str) -> bool:
    """Whether ``call``'s role meets ``requirement`` on the resource ``name``."""
    access = context.authorizer
    if access is None:
        return True
    role = role_of(call)
    if role is None:
        return False
    if requirement.resource is KafkaResource.CLUSTER:
        if requirement is IDEMPOTENT:
            may = access.has_any(role, ResourceKind.TOPIC, Action.PRODUCE)
        else:
            may = access.is_super_user(role)
    else:
        may = access.allows(role, requirement.need, _KIND[requirement.resource], name)
    if not may:  # DEBUG: lists (Metadata, ListGroups) leave unseen names out this way too
        log.debug("kafka: %s (api %d): role %r lacks %s on %s %r", requirement.refused.name,
                  call.api_key, role, requirement.need.value, requirement.resource.value, name)
    return may


def may_produce_somewhere(context: KafkaContext, call: Call) -> bool:
    """IdempotentWrite: whether the role may produce to at least one topic."""
    return allowed(context, call, IDEMPOTENT, "")


#: (error code, base offset, error message) of a refused Produce partition.
_Refusal = tuple[ErrorCode, int, str | None]


def refused_partitions(context: KafkaContext, call: Call,
                       parts: list[tuple[str, int, bytes | None]]) -> dict[str, _Refusal]:
    """Produce: the refusal of each topic the role may not write, by topic.

    A transactional Produce also needs the transactional id (every partition
    of the request is then refused, as Kafka does).
    """
    if context.authorizer is None:
        return {}
    transactional_id = call.request.transactional_id
    if transactional_id is not None and not allowed(context, call, TXN_PRODUCE,
                                                    transactional_id):
        message = f"{_who(call)} may not use transactional id {transactional_id!r}"
        return {name: (TXN_PRODUCE.refused, -1, message) for name, _, _ in parts}
    return {name: (TOPIC_PRODUCE.refused, -1, f"{_who(call)} lacks produce permission on "
                   f"topic {name!r}")
            for name, _, _ in parts if not allowed(context, call, TOPIC_PRODUCE, name)}


def _who(call: Call) -> str:
    role = role_of(call)
    return "an unauthenticated client" if role is None else f"role {role!r}"
