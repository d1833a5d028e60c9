"""The brokers Kafka clients see (Metadata): this one alone, or every broker of a cluster.

Kafka names brokers by integer node ids and each partition by its leader's
node. A standalone is node 0, leading every partition. In a cluster
(``folio broker --metadata-url``) every broker registers its Kafka address
with its container ownership records (docs/cluster.md), and
``ClusterNodes`` (``broker.app.kafka_cluster``) answers from the owner
cache: each live broker is a node, and a partition's leader is the node of
the broker owning the segment's container (None while no owner is known:
LEADER_NOT_AVAILABLE, clients ask again; None too while its owner has no
listener of the name the client connected on: LISTENER_NOT_FOUND), its leader
epoch that ownership's (``broker.kafka.leader_epochs``).

A broker's node id is ``node_id_of(broker id)``: CRC-32 of the id, 31 bits,
so every broker computes the same id for the same broker without asking.
"""

from __future__ import annotations

import zlib
from typing import Protocol

from broker.kafka.locator import Node

__all__ = ["ClusterNodes", "node_id_of", "parse_node"]


def node_id_of(broker_id: str) -> int:
    """The Kafka node id of the broker ``broker_id``: CRC-32 of it, kept to 31 bits (>= 0)."""
    return zlib.crc32(broker_id.encode("utf-8")) & 0x7FFFFFFF


def parse_node(broker_id: str, kafka_address: str) -> Node | None:
    """The node of a broker whose Kafka listener is at ``kafka_address`` (None: none or bad).

    ``host:port``; an IPv6 host may be in brackets (they are dropped, as
    Kafka's Metadata carries the bare host).
    """
    host, sep, port = kafka_address.rpartition(":")
    if not sep or not host or not port.isdigit():
        return None
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return Node(node_id_of(broker_id), host, int(port))


class ClusterNodes(Protocol):
    """What Metadata asks of a cluster (``KafkaContext.nodes``)."""

    def this_node(self) -> Node:
        """This broker's node."""

    def nodes(self) -> list[Node]:
        """Every live broker that serves Kafka."""

    def leader_of(self, segment: str) -> Node | None:
        """The node of the broker owning ``segment`` now; None while none is known."""

    def leader_lacks_listener(self, segment: str) -> bool:
        """Whether ``segment`` has a live owner (its epoch published) that serves no Kafka
        listener of this name: ``leader_of`` is None for that reason alone (Metadata
        v6+ answers LISTENER_NOT_FOUND, as Kafka does, not LEADER_NOT_AVAILABLE)."""

    def leader_epoch_of(self, segment: str) -> int:
        """The leader epoch of ``segment`` (its container's ownership); -1 while unknown."""
