"""DescribeCluster (key 60) v0-v2 and DescribeLogDirs (key 35) v1-v5: the brokers and their data.

DescribeCluster answers the brokers Metadata names (a standalone: node 0; a
cluster: every live broker serving Kafka, ``KafkaContext.nodes``), the
cluster id, and this broker as the controller (Folio has no controller: any
broker serves the admin APIs, as Metadata already says). v1's endpoint type
2 (controllers) answers UNSUPPORTED_ENDPOINT_TYPE, as a Kafka broker does;
no broker is ever fenced (v2's ``is_fenced`` is false: a fenced Folio broker
is not in the list at all).

DescribeLogDirs describes the one "log dir" a Folio broker has: its share of
the ledger service. It is named ``folio:ledgers`` (not a path: a segment's
bytes are ledger entries on the bookies, replicated by the ledger's quorum,
not files of this broker); each partition this broker serves (in a cluster:
the segments it owns) is listed with its size in bytes (``SegmentInfo
.length_bytes``, what retention counts) and an offset lag of 0 (there are no
followers). ``is_cordoned`` (v5) is false (Folio cannot cordon a log dir).

``total_bytes`` and ``usable_bytes`` (v4+) are what Kafka reports of the
volume a log dir is on (Java's ``FileStore.getTotalSpace`` and
``getUsableSpace``: ``f_blocks`` and ``f_bavail`` times ``f_frsize`` of
``statvfs``), where the broker can know them: a standalone reports the disk
of its in-process bookie's data directory (``KafkaContext.ledger_dir``), where
every entry is stored. A broker whose ledgers are on ``folio bookie``
processes (``folio broker --bookies``, a cluster broker) answers -1, Kafka's
"unknown": its own data directory, if any, holds no entries, and the bookie
protocol has no call that reports a bookie's disk. A ``statvfs`` that fails
(the directory gone) answers -1 too.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import os
from typing import Any

from kio.schema.errors import ErrorCode

from broker.api import SegmentRange
from broker.errors import BrokerError, WrongHostError
from broker.kafka.access import CLUSTER, allowed
from broker.kafka.context import NODE_ID, KafkaContext
from broker.kafka.dispatch import Api, Call
from broker.kafka.locator import Node
from broker.kafka.messages import build, nested, response_class
from broker.kafka.partitions import partition_segments
from ledger.errors import LedgerError

__all__ = ["DESCRIBE_CLUSTER_KEY", "DESCRIBE_LOG_DIRS_KEY", "LOG_DIR", "ROWS", "cluster_nodes",
           "volume_space"]

DESCRIBE_CLUSTER_KEY = 60
DESCRIBE_LOG_DIRS_KEY = 35
#: The name DescribeLogDirs gives a broker's data: its segments in the ledger service.
LOG_DIR = "folio:ledgers"
_BROKERS = 1
_ZERO = datetime.timedelta(0)

log = logging.getLogger(__name__)


def cluster_nodes(context: KafkaContext) -> tuple[Node, list[Node]]:
    """This broker's node and every live broker's (this one included), as Metadata lists them."""
    if context.nodes is None:
        this = Node(NODE_ID, context.host, context.advertised_port or context.port)
        return this, [this]
    this = context.nodes.this_node()
    nodes = context.nodes.nodes()
    if all(node.node_id != this.node_id for node in nodes):
        nodes.append(this)  # its own registration not yet in the owner cache
    return this, nodes


async def handle_describe_cluster(context: KafkaContext, call: Call) -> Any:
    """The brokers, the cluster id, this broker as the controller."""
    cls = response_class(DESCRIBE_CLUSTER_KEY, call.version)
    endpoint_type = getattr(call.request, "endpoint_type", _BROKERS)
    if endpoint_type != _BROKERS:
        return build(cls, throttle_time=_ZERO, error_code=ErrorCode.unsupported_endpoint_type,
                     error_message="a Folio cluster has no controllers: ask for brokers (1)",
                     endpoint_type=endpoint_type, cluster_id=context.cluster_id,
                     controller_id=-1, brokers=(), cluster_authorized_operations=-2**31)
    this, nodes = cluster_nodes(context)
    broker_cls = nested(cls, "DescribeClusterBroker")
    brokers = tuple(build(broker_cls, broker_id=node.node_id, host=node.host, port=node.port,
                          rack=None, is_fenced=False)
                    for node in sorted(nodes, key=lambda node: node.node_id))
    return build(cls, throttle_time=_ZERO, error_code=ErrorCode.none, error_message=None,
                 endpoint_type=_BROKERS, cluster_id=context.cluster_id,
                 controller_id=this.node_id, brokers=brokers,
                 cluster_authorized_operations=-2**31)


async def handle_describe_log_dirs(context: KafkaContext, call: Call) -> Any:
    """The partitions this broker serves and their sizes, under ``LOG_DIR``."""
    cls = response_class(DESCRIBE_LOG_DIRS_KEY, call.version)
    result_cls = nested(cls, "DescribeLogDirsResult")
    if not allowed(context, call, CLUSTER, ""):
        # v1-v2 have no top-level code: the one result carries it.
        refused = build(result_cls, error_code=CLUSTER.refused, log_dir=LOG_DIR, topics=(),
                        total_bytes=-1, usable_bytes=-1, is_cordoned=False)
        return build(cls, throttle_time=_ZERO, error_code=CLUSTER.refused,
                     results=(refused,))
    asked: list[tuple[str, set[int] | None]]
    if call.request.topics is None:
        asked = [(info.name, None) for info in await context.topics.list_topics()]
    else:
        asked = [(topic.topic, set(topic.partitions)) for topic in call.request.topics]
    topic_cls = nested(cls, "DescribeLogDirsTopic")
    topics = []
    for name, wanted in asked:
        partitions = await _partitions(context, cls, name, wanted)
        if partitions:
            topics.append(build(topic_cls, name=name, partitions=tuple(partitions)))
    total_bytes, usable_bytes = await volume_space(context.ledger_dir)
    result = build(result_cls, error_code=ErrorCode.none, log_dir=LOG_DIR, topics=tuple(topics),
                   total_bytes=total_bytes, usable_bytes=usable_bytes, is_cordoned=False)
    return build(cls, throttle_time=_ZERO, error_code=ErrorCode.none, results=(result,))


async def volume_space(directory: str | None) -> tuple[int, int]:
    """The total and usable bytes of the volume ``directory`` is on; (-1, -1): unknown.

    Usable is what an unprivileged writer may still use (``f_bavail``, as
    Java's ``getUsableSpace``), not the blocks only root may take.
    """
    if directory is None:
        return -1, -1
    try:
        # In a thread: a hung network mount must not stall every connection.
        stats = await asyncio.to_thread(os.statvfs, directory)
    except OSError as error:
        log.warning("DescribeLogDirs: cannot read the space of %s: %s", directory, error)
        return -1, -1
    return stats.f_blocks * stats.f_frsize, stats.f_bavail * stats.f_frsize


async def _partitions(context: KafkaContext, cls: Any, topic: str,
                      wanted: set[int] | None) -> list[Any]:
    """The partitions of ``topic`` this broker serves (unknown topics and others' left out)."""
    try:
        segments: list[SegmentRange] = await partition_segments(context.topics, topic)
    except (BrokerError, LedgerError):
        return []  # as Kafka: a partition not on this broker is not listed
    partition_cls = nested(cls, "DescribeLogDirsPartition")
    this = context.nodes.this_node() if context.nodes is not None else None
    found = []
    for segment in segments:
        if wanted is not None and segment.number not in wanted:
            continue
        if context.nodes is not None and context.nodes.leader_of(segment.name) != this:
            continue  # another broker owns it (or no one now): not on this broker
        try:
            handle = await context.topics.segment(segment.name)
        except WrongHostError:
            continue  # another broker owns it
        except (BrokerError, LedgerError):
            continue
        found.append(build(partition_cls, partition_index=segment.number,
                           partition_size=handle.info().length_bytes, offset_lag=0,
                           is_future_key=False))
    return found


ROWS = (
    Api(DESCRIBE_CLUSTER_KEY, "DescribeCluster", 0, 2, handle_describe_cluster),
    Api(DESCRIBE_LOG_DIRS_KEY, "DescribeLogDirs", 1, 5, handle_describe_log_dirs),
)
