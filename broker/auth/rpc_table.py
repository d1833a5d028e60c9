"""THE table: every RPC the broker serves and the permission it needs on which resource.

One row per RPC, keyed by its full gRPC method name. A row says what the
caller needs (``Need``) and how to find the resources in the request
(``resources``: the names the permission is checked on, each by
``ResourceKind``). ``tests/unit/broker/auth/test_rpc_table.py`` enumerates
every service of the public protos and fails if an RPC has no row, then
checks each row against a real broker.

The Append stream carries no resource in its call: its row is checked once
per flow, at each ``SetupAppend`` (``broker.auth.authorizer.setup_check``),
never per block.

Why the rows that need only authentication:

- ``ListTopics``, ``ListReaderGroups``, ``ListKafkaGroups``: names only (a
  Kafka group's state and member count too), so that tools can browse; the
  topics' contents, configs and segments, a group's members and offsets still
  need a permission.
- ``ListBrokers``: the cluster's broker addresses, which every client needs
  to bootstrap (they are the addresses it may connect to anyway).
- ``BrokerInternal`` (proto/broker/v1/internal.proto, not public): only other
  brokers of the cluster call it, with a super-user role's token
  (``--peer-token-file``); any other role gets PERMISSION_DENIED. A client
  that could register segments or write markers could commit or abort
  others' transactions.
- ``Transactions``: a transaction has no topic of its own. Every write in it
  is an Append with its txn id, which needs ``produce`` on that topic
  (so a role needs produce on every topic it writes in a transaction), and a
  transaction id is a random 16-byte capability known only to its writer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from broker._proto.v1 import internal_pb2, kafka_internal_pb2
from broker.auth.access import Need
from broker.auth.permissions import ResourceKind
from broker.errors import NoSuchSegmentError
from broker.segments.names import parse_segment_name
from folio.api.v1 import admin_pb2, append_pb2, groups_pb2, read_pb2, transactions_pb2

__all__ = ["RPC_TABLE", "Need", "Rule", "rule_for"]


Resources = Callable[[Any], list[tuple[ResourceKind, str]]]


def _none(_request: Any) -> list[tuple[ResourceKind, str]]:
    return []


def _topic(field: str) -> Resources:
    def resources(request: Any) -> list[tuple[ResourceKind, str]]:
        return [(ResourceKind.TOPIC, getattr(request, field))]
    return resources


def _topic_of_segment(field: str) -> Resources:
    def resources(request: Any) -> list[tuple[ResourceKind, str]]:
        return [(ResourceKind.TOPIC, topic_of(getattr(request, field)))]
    return resources


def _group(request: Any) -> list[tuple[ResourceKind, str]]:
    return [(ResourceKind.GROUP, request.name)]


def _new_group(request: Any) -> list[tuple[ResourceKind, str]]:
    # Creating a group that reads topics needs consume on each of them too.
    return [(ResourceKind.GROUP, request.name),
            *((ResourceKind.TOPIC, topic) for topic in request.state.topics)]


def _reset_group(request: Any) -> list[tuple[ResourceKind, str]]:
    # As a commit of the group's offsets: consume on the group and on each topic named.
    named = {*request.topics, *(p.topic for p in request.partitions),
             *(o.topic for o in request.offsets)}
    return [(ResourceKind.GROUP, request.name),
            *((ResourceKind.TOPIC, topic) for topic in sorted(named))]


def _granted(request: Any) -> list[tuple[ResourceKind, str]]:
    grant = request.grant
    kind = ResourceKind.GROUP if grant.kind == admin_pb2.RESOURCE_KIND_GROUP \
        else ResourceKind.TOPIC
    return [(kind, grant.resource)]


def topic_of(segment: str) -> str:
    """The topic of ``"<topic>/<number>"``; the whole text if it is not a segment name.

    A bad name is then checked as a topic name: refused unless the role may
    touch that "topic", and otherwise left to the servicer to answer.
    """
    try:
        return parse_segment_name(segment)[0]
    except NoSuchSegmentError:
        return segment


@dataclass(frozen=True, slots=True)
class Rule:
    """One row: what the call needs, on which resources of its request."""

    need: Need
    resources: Resources = _none
    #: Checked at each SetupAppend of the stream rather than on the call.
    per_flow: bool = False


def _method(module: Any, service: str, method: str) -> str:
    return f"/{module.DESCRIPTOR.services_by_name[service].full_name}/{method}"


_ADMIN = admin_pb2, "Admin"
_GROUPS = groups_pb2, "ReaderGroups"
_TXN = transactions_pb2, "Transactions"
_INTERNAL = internal_pb2, "BrokerInternal"

#: Every RPC the broker serves (public, and the brokers' internal ones), by full method name.
RPC_TABLE: Final[dict[str, Rule]] = {
    _method(*_ADMIN, "CreateTopic"): Rule(Need.ADMIN, _topic("name")),
    _method(*_ADMIN, "GetTopic"): Rule(Need.LOOKUP, _topic("name")),
    _method(*_ADMIN, "ListTopics"): Rule(Need.AUTHENTICATED),
    _method(*_ADMIN, "DeleteTopic"): Rule(Need.ADMIN, _topic("name")),
    _method(*_ADMIN, "UpdateTopicConfig"): Rule(Need.ADMIN, _topic("name")),
    _method(*_ADMIN, "GetSegments"): Rule(Need.LOOKUP, _topic("topic")),
    _method(*_ADMIN, "GetSegmentInfo"): Rule(Need.LOOKUP, _topic_of_segment("segment")),
    _method(*_ADMIN, "TruncateSegment"): Rule(Need.ADMIN, _topic_of_segment("segment")),
    _method(*_ADMIN, "ScaleTopic"): Rule(Need.ADMIN, _topic("topic")),
    _method(*_ADMIN, "GetSuccessors"): Rule(Need.LOOKUP, _topic_of_segment("segment")),
    _method(*_ADMIN, "SealTopic"): Rule(Need.ADMIN, _topic("name")),
    _method(*_ADMIN, "LookupSegment"): Rule(Need.LOOKUP, _topic_of_segment("segment")),
    _method(*_ADMIN, "ListBrokers"): Rule(Need.AUTHENTICATED),
    _method(*_ADMIN, "GrantPermission"): Rule(Need.ADMIN, _granted),
    _method(*_ADMIN, "RevokePermission"): Rule(Need.ADMIN, _granted),
    _method(*_ADMIN, "ListPermissions"): Rule(Need.SUPER_USER),
    _method(append_pb2, "Append", "Append"): Rule(
        Need.PRODUCE, _topic_of_segment("segment"), per_flow=True),
    _method(append_pb2, "Produce", "Produce"): Rule(Need.PRODUCE, _topic("topic")),
    _method(read_pb2, "Read", "Read"): Rule(Need.CONSUME, _topic_of_segment("segment")),
    _method(*_TXN, "BeginTxn"): Rule(Need.AUTHENTICATED),
    _method(*_TXN, "CommitTxn"): Rule(Need.AUTHENTICATED),
    _method(*_TXN, "AbortTxn"): Rule(Need.AUTHENTICATED),
    _method(*_TXN, "AbortTxns"): Rule(Need.AUTHENTICATED),
    _method(*_TXN, "GetTxnStatus"): Rule(Need.AUTHENTICATED),
    _method(*_GROUPS, "CreateReaderGroup"): Rule(Need.CONSUME, _new_group),
    _method(*_GROUPS, "GetReaderGroup"): Rule(Need.CONSUME, _group),
    _method(*_GROUPS, "UpdateReaderGroup"): Rule(Need.CONSUME, _group),
    _method(*_GROUPS, "DeleteReaderGroup"): Rule(Need.ADMIN, _group),
    _method(*_GROUPS, "ListReaderGroups"): Rule(Need.AUTHENTICATED),
    _method(*_GROUPS, "Heartbeat"): Rule(Need.CONSUME, _group),
    _method(*_GROUPS, "GetMembers"): Rule(Need.CONSUME, _group),
    # Kafka consumer groups: the same group resource the Kafka listener checks
    # (DescribeGroups needs describe, i.e. any permission, on the group).
    _method(*_GROUPS, "ListKafkaGroups"): Rule(Need.AUTHENTICATED),
    _method(*_GROUPS, "DescribeKafkaGroup"): Rule(Need.LOOKUP, _group),
    _method(*_GROUPS, "DeleteKafkaGroup"): Rule(Need.ADMIN, _group),
    _method(*_GROUPS, "ResetKafkaGroup"): Rule(Need.CONSUME, _reset_group),
    _method(*_INTERNAL, "RegisterTxnSegment"): Rule(Need.SUPER_USER),
    _method(*_INTERNAL, "WriteTxnMarker"): Rule(Need.SUPER_USER),
    _method(kafka_internal_pb2, "KafkaInternal", "AppendKafkaBatch"): Rule(Need.SUPER_USER),
    _method(kafka_internal_pb2, "KafkaInternal", "OffsetForTime"): Rule(Need.SUPER_USER),
    _method(kafka_internal_pb2, "KafkaInternal", "ShareState"): Rule(Need.SUPER_USER),
    _method(*_INTERNAL, "FindKafkaTxn"): Rule(Need.SUPER_USER),
    _method(*_INTERNAL, "AddKafkaTxnOffsets"): Rule(Need.SUPER_USER),
    _method(*_INTERNAL, "CommitKafkaTxnOffsets"): Rule(Need.SUPER_USER),
    _method(*_INTERNAL, "PendingKafkaTxnOffsets"): Rule(Need.SUPER_USER),
}

#: What a method the table does not know needs: a super-user (fail closed).
_UNKNOWN: Final = Rule(Need.SUPER_USER)


def rule_for(method: str) -> Rule:
    """The row of ``method``; a method missing from the table needs a super-user."""
    return RPC_TABLE.get(method, _UNKNOWN)
