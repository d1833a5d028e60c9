"""What every Kafka handler may use: the broker's domain objects and this listener's identity."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any

from broker.api import Topics
from broker.auth.access import Access
from broker.kafka.coordinators import KafkaCoordinators
from broker.kafka.dynamic_configs import DynamicBrokerConfigs
from broker.kafka.fetch_sessions import FetchSessionCache
from broker.kafka.forwarding import HeirForwarder
from broker.kafka.locator import CoordinatorLocator
from broker.kafka.nodes import ClusterNodes
from broker.kafka.producer_ids import ProducerIds
from broker.kafka.quotas.connections import ConnectionQuotas
from broker.kafka.quotas.enforcer import ClientQuotas
from broker.kafka.quotas.store import QuotaStore
from broker.kafka.sasl.security import KafkaSecurity
from broker.kafka.succession import Succession
from broker.kafka.topic_ids import TopicIds
from txnbuffer.api import TxnId

#: One served API: (api_key, min_version, max_version), what ApiVersions lists.
ServedApi = tuple[int, int, int]
#: A transactional batch accepted into its producer's open Folio transaction:
#: the transaction and the coordinator's context its append runs in (which
#: registers the segment and holds the commit until the append is done).
TxnWrite = tuple[TxnId, AbstractAsyncContextManager[None]]
#: Checks a transactional batch: (context, transactional id, segment name, batch
#: header) -> (Kafka error code, message, the ``TxnWrite`` or None: refused); awaited
#: (in a cluster the transaction coordinator may run on another broker).
#: Produce then appends it as it appends any batch (``broker.kafka.handlers.produce``).
TransactionalWrite = Callable[
    ["KafkaContext", str | None, str, Any],
    Awaitable[tuple[Any, str | None, TxnWrite | None]]]
#: Checks (KIP-890) that a transactional batch's partition is in its producer's
#: transaction, or adds it (Produce v12+): (context, transactional id, topic,
#: partition, batch header, Produce version) -> (Kafka error code, message).
TransactionalCheck = Callable[
    ["KafkaContext", str | None, str, int, Any, int], Awaitable[tuple[Any, str | None]]]
#: Answers InitProducerId for a transactional id: (context, call) -> (Kafka
#: error code, producer id, epoch).
TransactionalProducerId = Callable[["KafkaContext", Any], Awaitable[tuple[Any, int, int]]]

__all__ = ["NODE_ID", "KafkaContext", "ServedApi", "TransactionalCheck",
           "TransactionalProducerId", "TransactionalWrite", "TxnWrite"]

#: The node id this broker gives itself in Metadata: clients see a one-node cluster.
NODE_ID = 0


@dataclass
class KafkaContext:
    """Shared by the handlers of every connection of one listener.

    Attributes:
        topics: the broker's topics and segments.
        host: the host Kafka clients are told to connect to (Metadata).
        port: the listener's port (set once it is bound).
        advertised_port: the port Metadata tells clients; 0: ``port``.
        cluster_id: the cluster id Metadata reports.
        producer_ids: gives out idempotent producer ids (InitProducerId).
        stopping: set when the listener stops: long polls end at once.
        served: the dispatch table's rows as ApiVersions lists them.
        succession: sends Produce batches for sealed partitions to their heirs.
        transactional_write: checks a Kafka transactional batch (set by the
            transaction handlers; None: such batches are refused).
        transactional_check: checks (or adds) a transactional batch's
            partition in its transaction first (KIP-890; None: not checked).
        coordinators: consumer groups and transactional ids (None: group and
            transaction requests answer COORDINATOR_NOT_AVAILABLE).
        nodes: the cluster's brokers and partition leaders (None: this
            broker alone, node ``NODE_ID``, leads every partition).
        authorizer: checks each call's principal against the grants
            (``broker.kafka.access``); None: no authorisation, all allowed.
        security: TLS, SASL and the SCRAM credentials of this listener
            (None: plain text, no one authenticates, no SCRAM credentials).
        auto_create_topics: Kafka's ``auto.create.topics.enable``
            (``broker.kafka.auto_create``).
        num_partitions: Kafka's ``num.partitions``: the segments of an
            auto-created topic, and of CreateTopics' ``num_partitions`` -1.
        write_quorum: copies of each entry (Qw) of new ledgers: the largest
            replication factor CreateTopics accepts (``topics_admin``).
        fetch_sessions: the incremental fetch sessions (KIP-227) of this
            listener (``broker.kafka.fetch_sessions``).
        topic_ids: topic id -> name for Fetch and Produce v13+ (``broker.kafka.topic_ids``).
        forwarder: sends Produce batches whose heir another broker owns to
            that broker (``broker.kafka.forwarding``; None: this broker alone,
            or such batches answer NOT_LEADER_OR_FOLLOWER).
        ledger_dir: the data directory of the bookie in this process (a
            standalone), whose disk DescribeLogDirs reports the size and free
            space of; None: the ledgers are on other processes' disks (the
            sizes are -1, unknown).
        quota_store: the cluster's client quotas (DescribeClientQuotas,
            AlterClientQuotas; ``broker.kafka.quotas``); None: not served.
        quotas: counts Produce and Fetch bytes, request times and controller
            mutations against them and answers the throttle times (None: no
            client is throttled).
        connection_quotas: admits new connections against the ip quotas and
            the broker's connection caps (None: every one is admitted).
        dynamic_configs: the dynamic broker configs (AlterConfigs of a broker;
            ``broker.kafka.dynamic_configs``); None: refused.
        listener: this listener's name (docs/kafka.md, "Listeners").
        locator: FindCoordinator's answers for this listener's clients
            (None: ``coordinators.locator``'s).
        listener_configs: DescribeConfigs' ``listeners``,
            ``advertised.listeners`` and ``listener.security.protocol.map``
            of this broker (None: this listener's alone).
    """

    topics: Topics
    host: str
    producer_ids: ProducerIds
    port: int = 0
    advertised_port: int = 0
    cluster_id: str = "folio"
    stopping: asyncio.Event = field(default_factory=asyncio.Event)
    served: tuple[ServedApi, ...] = ()
    succession: Succession = field(default_factory=Succession)
    transactional_write: TransactionalWrite | None = None
    transactional_check: TransactionalCheck | None = None
    transactional_producer_id: TransactionalProducerId | None = None
    coordinators: KafkaCoordinators | None = None
    nodes: ClusterNodes | None = None
    authorizer: Access | None = None
    security: KafkaSecurity | None = None
    auto_create_topics: bool = True
    num_partitions: int = 1
    write_quorum: int = 1
    fetch_sessions: FetchSessionCache = field(default_factory=FetchSessionCache)
    topic_ids: TopicIds = field(default_factory=TopicIds)
    forwarder: HeirForwarder | None = None
    ledger_dir: str | None = None
    quota_store: QuotaStore | None = None
    quotas: ClientQuotas | None = None
    connection_quotas: ConnectionQuotas | None = None
    dynamic_configs: DynamicBrokerConfigs | None = None
    listener: str = ""
    locator: CoordinatorLocator | None = None
    listener_configs: tuple[str, str, str] | None = None
