"""What every Kafka handler may use: the broker's domain objects and this listener's identity."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from broker.api import Topics
from broker.kafka.producer_ids import ProducerIds
from broker.kafka.sequences import RecentBatches

#: One served API: (api_key, min_version, max_version), what ApiVersions lists.
ServedApi = tuple[int, int, int]

__all__ = ["NODE_ID", "KafkaContext", "ServedApi"]

#: The node id this broker gives itself in Metadata: clients see a one-node cluster.
NODE_ID = 0


@dataclass
class KafkaContext:
    """Shared by the handlers of every connection of one listener.

    Attributes:
        topics: the broker's topics and segments.
        host: the host Kafka clients are told to connect to (Metadata).
        port: the listener's port (set once it is bound).
        cluster_id: the cluster id Metadata reports.
        producer_ids: gives out idempotent producer ids (InitProducerId).
        recent_batches: the offsets of each idempotent producer's last
            batches, to answer a retried batch with its original offset.
        stopping: set when the listener stops: long polls end at once.
        served: the dispatch table's rows as ApiVersions lists them.
    """

    topics: Topics
    host: str
    producer_ids: ProducerIds
    port: int = 0
    cluster_id: str = "folio"
    recent_batches: RecentBatches = field(default_factory=RecentBatches)
    stopping: asyncio.Event = field(default_factory=asyncio.Event)
    served: tuple[ServedApi, ...] = ()
