"""Metadata (key 3), v0-v12: the brokers and the leader of each partition of the topics asked.

On a standalone this broker (node 0) leads every partition. In a cluster
(``KafkaContext.nodes``) every live broker is a node and a partition's leader
is the node of its segment's owner, from the owner cache (no metadata-store
read per request); while no owner is known the partition answers
LEADER_NOT_AVAILABLE with leader -1, and clients ask again. An owner that
serves no listener of the name the request came on is left out of the
brokers, and its partitions answer LISTENER_NOT_FOUND (v6+; before,
LEADER_NOT_AVAILABLE) with leader -1, as Kafka answers.

A topic's partitions are its segments by number (``broker.kafka.partitions``),
sealed ones included. A missing topic asked by name is created when the
request allows it (``allow_auto_topic_creation``) and the broker's
``kafka_auto_create_topics`` is on, as Kafka's ``auto.create.topics.enable``
(``broker.kafka.auto_create``: TOPIC_AUTHORIZATION_FAILED without the
permission to create it, INVALID_TOPIC_EXCEPTION for a name Kafka refuses,
LEADER_NOT_AVAILABLE while another creator finishes it); otherwise an
unknown topic, or a system one, is UNKNOWN_TOPIC_OR_PARTITION. v10+ answers
carry each topic's id, from its record (given there to a topic of an
earlier build: ``TopicCatalog.topic_id``), noted for Fetch v13+
(``broker.kafka.topic_ids``). v12 may ask for topics by id (name null), as
KIP-848 consumers do for the topics of their assignment: answered as by
name (never created), UNKNOWN_TOPIC_ID for an id no topic has.

While the metadata store cannot be read (a ZooKeeper connection loss:
``MetadataUnavailableError``, or any retriable ``LedgerError``) the request
reads again, with backoff, for up to ``READ_WAIT_S`` in all (one budget per
request: the topic list and every topic asked), so a short outage (a reset
link, a lost answer, a ZooKeeper restart, a new session) costs the client a
slower answer and nothing else. Past that, the request fails the way any
handler's retriable storage error does (``broker.kafka.connection``: the
connection is closed with a warning, the client reconnects and asks again,
maybe another broker). Neither outcome names a topic that exists as
missing, and no topic is answered with an error and no partitions:
librdkafka keeps no cache entry for such an answer (LEADER_NOT_AVAILABLE
included), and a consumer whose subscription finds no entry reports
"Subscribed topic not available: ... Unknown topic or partition" to the
application (issue 22, nemesis seed 16: a consumer's first Metadata reached
a broker whose ZooKeeper link was blackholed). An empty list for all topics
would likewise tell clients that every topic is gone. UNKNOWN_TOPIC_OR_PARTITION
is answered only when the store says the topic's record does not exist.

With authorisation (``broker.kafka.access``), all topics means those the role
has any permission on; a topic asked by name without one is
TOPIC_AUTHORIZATION_FAILED whether it exists or not (as Kafka answers, so
names do not leak).
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from kio.schema.errors import ErrorCode

from broker.errors import BrokerError, BrokerShuttingDownError
from broker.kafka.access import TOPIC_ADMIN, TOPIC_LOOKUP, allowed
from broker.kafka.auto_create import CreateDeniedError, TopicBeingCreatedError, segments_or_create
from broker.kafka.context import NODE_ID, KafkaContext
from broker.kafka.dispatch import Api, Call
from broker.kafka.error_codes import error_code
from broker.kafka.leader_epochs import leader_epoch
from broker.kafka.locator import Node
from broker.kafka.messages import build, has_field, nested, response_class
from broker.segments.names import make_segment_name
from ledger.errors import LedgerError

__all__ = ["METADATA_KEY", "READ_WAIT_S", "ROWS", "partition_leader", "read_again"]

log = logging.getLogger(__name__)

METADATA_KEY = 3
_ZERO = datetime.timedelta(0)
#: Kafka's "no topic id": a topic answered with an error has none.
_NO_TOPIC_ID = uuid.UUID(int=0)
#: How long one request reads again a metadata store that cannot be read, in all.
READ_WAIT_S = 5.0
#: The first Metadata version whose partitions may answer LISTENER_NOT_FOUND (Kafka's).
_LISTENER_NOT_FOUND_SINCE = 6
_FIRST_DELAY_S = 0.05
_MAX_DELAY_S = 0.5
_T = TypeVar("_T")


async def handle_metadata(context: KafkaContext, call: Call) -> Any:
    """The brokers (this one) and the partitions of the topics asked (all: every user topic).

    Raises the last retriable ``LedgerError`` when the store could not be read
    within ``READ_WAIT_S`` (the connection is then closed), any other at once.
    """
    cls = response_class(METADATA_KEY, call.version)
    deadline = time.monotonic() + READ_WAIT_S
    asked = call.request.topics
    if asked is None or (call.version == 0 and not asked):
        # All topics: only those the role may see, as Kafka lists them.
        infos = await read_again(context.topics.list_topics, deadline,
                                  "the topic list cannot be read")
        names = [info.name for info in infos if allowed(context, call, TOPIC_LOOKUP, info.name)]
    else:
        names = [topic.name for topic in asked if topic.name is not None]
    # Absent before v4: Kafka creates for those versions whenever its setting allows.
    auto_create = asked is not None and bool(
        getattr(call.request, "allow_auto_topic_creation", True))
    topics = [await _topic(cls, context, name, deadline, create=auto_create,
                           permitted=allowed(context, call, TOPIC_ADMIN, name))
              if allowed(context, call, TOPIC_LOOKUP, name) else _refused(cls, name)
              for name in names]
    if asked is not None and call.version >= 12:  # topics asked by id (KIP-848 consumers)
        for topic in asked:
            if topic.name is None and getattr(topic, "topic_id", None):
                topics.append(await _by_id(cls, call, context, topic.topic_id, deadline))
    if context.nodes is None:
        this = Node(NODE_ID, context.host, context.advertised_port or context.port)
        nodes = [this]
    else:
        this = context.nodes.this_node()
        nodes = context.nodes.nodes()
        if all(node.node_id != this.node_id for node in nodes):
            nodes.append(this)  # (its own registration not yet seen in the cache)
    broker_cls = nested(cls, "MetadataResponseBroker")
    brokers = tuple(build(broker_cls, node_id=node.node_id, host=node.host, port=node.port,
                          rack=None) for node in nodes)
    return build(cls, throttle_time=_ZERO, brokers=brokers, cluster_id=context.cluster_id,
                 controller_id=this.node_id, topics=tuple(topics),
                 cluster_authorized_operations=0)


async def read_again(read: Callable[[], Awaitable[_T]], deadline: float, what: str) -> _T:
    """``read()``, asked again while the store cannot be read, up to ``deadline``.

    Reads only, so asking again is safe whatever the first attempt did.
    Raises the last retriable ``LedgerError`` at the deadline, any other at once.
    """
    delay = _FIRST_DELAY_S
    while True:
        try:
            return await read()
        except LedgerError as error:
            if not error.retriable or time.monotonic() + delay > deadline:
                raise
            log.info("kafka: Metadata: %s (%s); asking again", what, error)
            await asyncio.sleep(delay)
            delay = min(delay * 2, _MAX_DELAY_S)


async def _by_id(cls: Any, call: Call, context: KafkaContext, topic_id: uuid.UUID,
                 deadline: float) -> Any:
    """A topic asked by id (v12+): as by its name, never created; else UNKNOWN_TOPIC_ID.

    A role without a permission on the topic gets UNKNOWN_TOPIC_ID too, so ids
    do not tell which topics exist.
    """
    name = await read_again(lambda: context.topic_ids.name_of(context.topics, topic_id),
                             deadline, "the topic list cannot be read")
    if name is None or not allowed(context, call, TOPIC_LOOKUP, name):
        return build(nested(cls, "MetadataResponseTopic"), error_code=ErrorCode.unknown_topic_id,
                     name=None, topic_id=topic_id, is_internal=False, partitions=(),
                     topic_authorized_operations=0)
    return await _topic(cls, context, name, deadline, create=False, permitted=False)


def partition_leader(context: KafkaContext, topic: str, number: int) -> int:
    """The leader's node id of partition ``number``; -1 while its owner is not known."""
    if context.nodes is None:
        return NODE_ID
    node = context.nodes.leader_of(make_segment_name(topic, number))
    return -1 if node is None else node.node_id


def _refused(cls: Any, name: str, code: ErrorCode = TOPIC_LOOKUP.refused) -> Any:
    """A topic asked by name that the role may not see (whether it exists or not)."""
    return build(nested(cls, "MetadataResponseTopic"), error_code=code,
                 name=name, topic_id=_NO_TOPIC_ID, is_internal=False, partitions=(),
                 topic_authorized_operations=0)


async def _topic(cls: Any, context: KafkaContext, name: str, deadline: float, *,
                 create: bool, permitted: bool) -> Any:
    """One topic's answer; ``create``: auto-create it if missing (``broker.kafka.auto_create``)."""
    topic_cls = nested(cls, "MetadataResponseTopic")
    try:
        # Read again after an unknown outcome of a creation too: it looks the
        # topic up first, and an existing topic is success.
        segments = await read_again(lambda: segments_or_create(
            context, name, create=create, permitted=permitted),
                                     deadline, f"topic {name} cannot be read")
        topic_id = _NO_TOPIC_ID
        if has_field(topic_cls, "topic_id"):  # v10+
            topic_id = uuid.UUID(await read_again(lambda: context.topics.topic_id(name),
                                                   deadline, f"topic {name} cannot be read"))
            context.topic_ids.note(name, topic_id)  # for Fetch v13+ by id
    except TopicBeingCreatedError:
        return _refused(cls, name, ErrorCode.leader_not_available)
    except CreateDeniedError:
        return _refused(cls, name, TOPIC_ADMIN.refused)
    except BrokerShuttingDownError:
        # Not an answer with an error and no partitions: a librdkafka consumer
        # reports that topic as unknown to the application. The connection
        # closes (connection.py) and the client asks another broker.
        raise
    except BrokerError as error:  # no such topic (its record is not there)
        return build(topic_cls, error_code=error_code(error), name=name, topic_id=_NO_TOPIC_ID,
                     is_internal=False, partitions=(), topic_authorized_operations=0)
    except LedgerError as error:
        if error.retriable:
            raise  # past the deadline: the connection is closed, the client asks again
        return build(topic_cls, error_code=error_code(error), name=name, topic_id=_NO_TOPIC_ID,
                     is_internal=False, partitions=(), topic_authorized_operations=0)
    partitions = tuple(_partition(cls, context, name, segment.number) for segment in segments)
    return build(topic_cls, error_code=ErrorCode.none, name=name, topic_id=topic_id,
                 is_internal=False, partitions=partitions, topic_authorized_operations=0)


def _partition(cls: Any, context: KafkaContext, name: str, number: int) -> Any:
    """Partition ``number``'s answer: its leader, or why it has none.

    No leader: LISTENER_NOT_FOUND (v6+, with the partition's leader epoch) when
    its owner is a live broker without a listener of the name this client
    connected on, as Kafka's MetadataCache answers; LEADER_NOT_AVAILABLE while
    no owner is known, and for that case too before v6 (Kafka's rule).
    """
    leader = partition_leader(context, name, number)
    if leader >= 0:
        code, epoch = ErrorCode.none, leader_epoch(context.nodes, name, number)
    elif (int(cls.__version__) >= _LISTENER_NOT_FOUND_SINCE and context.nodes is not None
          and context.nodes.leader_lacks_listener(make_segment_name(name, number))):
        code, epoch = ErrorCode.listener_not_found, leader_epoch(context.nodes, name, number)
    else:
        code, epoch = ErrorCode.leader_not_available, -1
    replicas = (leader,) if leader >= 0 else ()
    return build(nested(cls, "MetadataResponsePartition"), partition_index=number,
                 leader_id=leader, leader_epoch=epoch, error_code=code,
                 replica_nodes=replicas, isr_nodes=replicas, offline_replicas=())


ROWS = (Api(METADATA_KEY, "Metadata", 0, 12, handle_metadata),)
