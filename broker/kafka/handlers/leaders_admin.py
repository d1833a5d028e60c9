"""ElectLeaders (43) v0-v2, List- (46) v0 and AlterPartitionReassignments (45) v0-v1.

A Folio partition has no replicas to choose a leader among or to move: its
one leader is the broker owning its segment's container (Metadata's leader,
replica and ISR lists all name it), ownership moves by itself when brokers
join, leave or die (docs/cluster.md), and copies of the data are the ledger
service's (each entry on Qw bookies). So these answer what a Folio cluster has:

- **ElectLeaders** (preferred or unclean): each partition asked whose owner is
  known answers ELECTION_NOT_NEEDED, Kafka's answer when the leader is already
  the one to elect; a partition without an owner now (its broker died, the
  next claims it within a session timeout) ELIGIBLE_LEADERS_NOT_AVAILABLE;
  all partitions (topics null) answers an empty list, as Kafka does when no
  election is needed.
- **ListPartitionReassignments**: no reassignment is ever in progress: an
  empty list.
- **AlterPartitionReassignments**: a new replica list is
  INVALID_REPLICA_ASSIGNMENT (saying why); cancelling one (replicas null)
  NO_REASSIGNMENT_IN_PROGRESS.

All three need the cluster (a super-user), as in Kafka (Alter / Describe on
the cluster); an unknown topic's partitions answer UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from broker.errors import BrokerError
from broker.kafka.access import CLUSTER, allowed
from broker.kafka.context import KafkaContext
from broker.kafka.dispatch import Api, Call
from broker.kafka.error_codes import error_code
from broker.kafka.messages import build, nested, response_class
from broker.kafka.partitions import partition_segments
from broker.segments.names import make_segment_name
from ledger.errors import LedgerError

__all__ = ["ALTER_REASSIGNMENTS_KEY", "ELECT_LEADERS_KEY", "LIST_REASSIGNMENTS_KEY", "ROWS"]

ELECT_LEADERS_KEY = 43
ALTER_REASSIGNMENTS_KEY = 45
LIST_REASSIGNMENTS_KEY = 46
_ZERO = datetime.timedelta(0)
_NO_REPLICAS = ("a Folio partition has no replicas to place: its leader is the broker owning "
                "its segment's container (ownership balances by itself), and its data is "
                "replicated by the ledger service's bookies")


async def _known(context: KafkaContext, topic: str) -> set[int] | ErrorCode:
    """The partition numbers of ``topic``, or the error code of reading them."""
    try:
        return {segment.number for segment in await partition_segments(context.topics, topic)}
    except (BrokerError, LedgerError) as error:
        return error_code(error)


async def handle_elect_leaders(context: KafkaContext, call: Call) -> Any:
    """ELECTION_NOT_NEEDED for each partition with an owner (there is no other replica)."""
    cls = response_class(ELECT_LEADERS_KEY, call.version)
    topic_cls = nested(cls, "ReplicaElectionResult")
    partition_cls = nested(cls, "PartitionResult")
    if not allowed(context, call, CLUSTER, ""):
        refused = tuple(build(topic_cls, topic=topic.topic, partition_result=tuple(
            build(partition_cls, partition_id=number, error_code=CLUSTER.refused,
                  error_message="electing leaders is the cluster's (a super-user's)")
            for number in topic.partitions)) for topic in call.request.topic_partitions or ())
        return build(cls, throttle_time=_ZERO, error_code=CLUSTER.refused,
                     replica_election_results=refused)
    results = []
    for topic in call.request.topic_partitions or ():
        known = await _known(context, topic.topic)
        partitions = []
        for number in topic.partitions:
            if isinstance(known, ErrorCode) or number not in known:
                code = known if isinstance(known, ErrorCode) else \
                    ErrorCode.unknown_topic_or_partition
                partitions.append(build(partition_cls, partition_id=number, error_code=code,
                                        error_message=f"{topic.topic}/{number}: {code.name}"))
                continue
            owned = context.nodes is None or context.nodes.leader_of(
                make_segment_name(topic.topic, number)) is not None
            if owned:
                code, message = ErrorCode.election_not_needed, (
                    "the broker owning the partition's segment is its only leader")
            else:
                code, message = ErrorCode.eligible_leaders_not_available, (
                    "no broker owns the partition now; the next claims it within a session "
                    "timeout")
            partitions.append(build(partition_cls, partition_id=number, error_code=code,
                                    error_message=message))
        results.append(build(topic_cls, topic=topic.topic, partition_result=tuple(partitions)))
    return build(cls, throttle_time=_ZERO, error_code=ErrorCode.none,
                 replica_election_results=tuple(results))


async def handle_list_reassignments(context: KafkaContext, call: Call) -> Any:
    """No reassignment is ever in progress."""
    cls = response_class(LIST_REASSIGNMENTS_KEY, call.version)
    if not allowed(context, call, CLUSTER, ""):
        return build(cls, throttle_time=_ZERO, error_code=CLUSTER.refused,
                     error_message="listing reassignments is the cluster's (a super-user's)",
                     topics=())
    return build(cls, throttle_time=_ZERO, error_code=ErrorCode.none, error_message=None,
                 topics=())


async def handle_alter_reassignments(context: KafkaContext, call: Call) -> Any:
    """Nothing to reassign: INVALID_REPLICA_ASSIGNMENT, or NO_REASSIGNMENT_IN_PROGRESS to cancel."""
    cls = response_class(ALTER_REASSIGNMENTS_KEY, call.version)
    topic_cls = nested(cls, "ReassignableTopicResponse")
    partition_cls = nested(cls, "ReassignablePartitionResponse")
    may = allowed(context, call, CLUSTER, "")
    responses = []
    for topic in call.request.topics:
        known = await _known(context, topic.name) if may else CLUSTER.refused
        partitions = []
        for partition in topic.partitions:
            if isinstance(known, ErrorCode):
                code, message = known, f"{topic.name}/{partition.partition_index}: {known.name}"
            elif partition.partition_index not in known:
                code, message = ErrorCode.unknown_topic_or_partition, None
            elif partition.replicas is None:
                code, message = ErrorCode.no_reassignment_in_progress, (
                    "no reassignment is ever in progress on a Folio cluster")
            else:
                code, message = ErrorCode.invalid_replica_assignment, _NO_REPLICAS
            partitions.append(build(partition_cls, partition_index=partition.partition_index,
                                    error_code=code, error_message=message))
        responses.append(build(topic_cls, name=topic.name, partitions=tuple(partitions)))
    return build(cls, throttle_time=_ZERO, error_code=ErrorCode.none if may else CLUSTER.refused,
                 error_message=None, allow_replication_factor_change=True,
                 responses=tuple(responses))


ROWS = (
    Api(ELECT_LEADERS_KEY, "ElectLeaders", 0, 2, handle_elect_leaders),
    Api(ALTER_REASSIGNMENTS_KEY, "AlterPartitionReassignments", 0, 1,
        handle_alter_reassignments),
    Api(LIST_REASSIGNMENTS_KEY, "ListPartitionReassignments", 0, 0, handle_list_reassignments),
)
