"""Segment containers: which container a segment belongs to, and the ownership nodes.

A cluster has a fixed number of segment containers, ``container_count``,
written once by ``folio cluster init`` in ``/cluster``. A segment belongs to
container ``crc32(segment name as UTF-8) mod container_count`` (CRC-32 of
zlib, IEEE 802.3, the one ``binascii.crc32``, Java's ``java.util.zip.CRC32``
and Go's ``hash/crc32.ChecksumIEEE`` compute), so any client can compute it
too (admin.proto, "Cluster"). System topics follow the same rule, with one
exception: the transaction coordinator's own topics (``_txnlog`` and
``_txncommitkeys``, and the Kafka transactional ids' ``_kafka_txn_state``)
all belong to the container of ``_txnlog/0``, so that the broker owning it
holds every segment the coordinator writes; and the
transaction buffers' snapshot topic has one segment per container, segment
``_txnbuffer_snapshots/<n>`` in container ``n``, so that the snapshots of a
container's segments are written by that container's owner only
(``broker.cluster.snapshots``). The Kafka listener's committed offsets
(``_kafka_offsets``) follow the same rule, so the broker coordinating a
consumer group owns the segment holding its offsets (docs/kafka.md).

Ownership of container ``n`` is the ephemeral node ``/containers/<n>/owner``
holding an ``OwnerRecord`` (JSON ``{"format_version": 1, "id": ..., "address": ...,
"incarnation": ..., "kafka": ..., "kafka_listeners": {...}}``, ``kafka`` and
``kafka_listeners`` only when the broker serves Kafka; framed by
``ledger.records``, and earlier builds' ``"version": 1`` still reads):
whoever creates it owns the container until it deletes the node or
its session ends. ``incarnation`` is random per broker
process: a broker restarted under the same id within the session timeout
sees its predecessor's nodes as someone else's (they vanish with that session).

The brokers taking part in the balance (``broker.cluster.balance``) hold an
ephemeral node ``/balance/<broker id>`` with the same record. It is apart
from the broker's registration (``/brokers/<id>``) because a broker leaves
the balance before it stops serving: it hands its containers over first.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

from broker.metadata_paths import CONTAINERS_PATH, MEMBERS_PATH
from ledger.records import dump_record, load_record

__all__ = [
    "CONTAINERS_PATH",
    "COORDINATOR_SEGMENT",
    "MEMBERS_PATH",
    "PER_CONTAINER_TOPICS",
    "SNAPSHOT_TOPIC",
    "OwnerRecord",
    "container_of",
    "epoch_path",
    "member_path",
    "owner_path",
]

#: The segment whose container holds the transaction coordinator and its topics.
COORDINATOR_SEGMENT = "_txnlog/0"
#: Topics placed with the coordinator (``broker.txn`` names them; repeated here
#: because this rule is protocol, documented in admin.proto).
_COORDINATOR_TOPICS = ("_txnlog/", "_txncommitkeys/", "_kafka_txn_state/")
#: The snapshot topic: its segment ``n`` is in container ``n`` (``broker.system``
#: names it; repeated here for the same reason).
SNAPSHOT_TOPIC = "_txnbuffer_snapshots"
#: The Kafka listener's committed offsets (``kafka.consumer_groups.offsets``), placed the same way.
KAFKA_OFFSETS_TOPIC = "_kafka_offsets"
#: The share partitions' states (``kafka.share_groups.store``): segment ``n`` holds those
#: of the partitions whose segments are in container ``n``, so they move together.
KAFKA_SHARE_STATE_TOPIC = "__folio_kafka_share_state"
#: Topics whose segment ``n`` is in container ``n``: they move with their containers.
PER_CONTAINER_TOPICS = (SNAPSHOT_TOPIC, KAFKA_OFFSETS_TOPIC, KAFKA_SHARE_STATE_TOPIC)
_PER_CONTAINER_PREFIXES = tuple(topic + "/" for topic in PER_CONTAINER_TOPICS)
_RECORD_VERSION = 1


def container_of(segment: str, container_count: int) -> int:
    """The container of ``segment`` ("<topic>/<number>"): CRC-32 of its name mod the count.

    Two placement exceptions: the coordinator's topics go to the container of
    ``_txnlog/0``; segment ``<topic>/<n>`` of a ``PER_CONTAINER_TOPICS`` topic
    (``_txnbuffer_snapshots``, ``_kafka_offsets``, ``__folio_kafka_share_state``) goes to
    container ``n mod container_count``.

    Raises:
        ValueError: ``container_count`` is not positive.
    """
    if container_count <= 0:
        raise ValueError(f"container_count must be positive, got {container_count}")
    if segment.startswith(_COORDINATOR_TOPICS):
        segment = COORDINATOR_SEGMENT
    elif segment.startswith(_PER_CONTAINER_PREFIXES):
        number = segment[segment.index("/") + 1:]
        if number.isascii() and number.isdigit():
            return int(number) % container_count
    return zlib.crc32(segment.encode("utf-8")) % container_count


def owner_path(container: int) -> str:
    """The ephemeral node that proves ownership of ``container``."""
    return f"{CONTAINERS_PATH}/{container}/owner"


def epoch_path(container: int) -> str:
    """The persistent node whose version is the container's latest leader epoch."""
    return f"{CONTAINERS_PATH}/{container}/epoch"


def member_path(broker_id: str) -> str:
    """The ephemeral node of a broker taking part in the balance."""
    return f"{MEMBERS_PATH}/{broker_id}"


@dataclass(frozen=True, slots=True)
class OwnerRecord:
    """The data of an ownership or member node: broker id, client address, incarnation.

    ``kafka``: the broker's (first) Kafka listener as Kafka clients reach it
    (``host:port``), "" when it serves none (docs/kafka.md, "Clusters");
    ``kafka_listeners``: every listener's, by name (docs/kafka.md,
    "Listeners"); empty in records of earlier builds, which had one
    listener and told every client its ``kafka`` (``kafka_on`` does too).

    ``leader_epoch`` (ownership nodes only): the container's epoch for this
    ownership (``broker.cluster.leader_epochs``), the Kafka leader epoch of
    its partitions; -1 while the claim is publishing it; 0 in records of
    earlier builds (which had no epochs: every partition's epoch was 0).
    """

    broker_id: str
    address: str
    incarnation: str = ""
    kafka: str = ""
    leader_epoch: int = 0
    kafka_listeners: tuple[tuple[str, str], ...] = ()

    def kafka_on(self, listener: str) -> str:
        """The ``host:port`` of listener ``listener`` ("": this broker has none of that name)."""
        if not self.kafka_listeners:
            return self.kafka  # an earlier build's one listener, told on every name
        return dict(self.kafka_listeners).get(listener, "")

    def to_bytes(self) -> bytes:
        fields: dict[str, object] = {"id": self.broker_id, "address": self.address,
                                     "incarnation": self.incarnation}
        if self.kafka:
            fields["kafka"] = self.kafka
        if self.leader_epoch:
            fields["epoch"] = self.leader_epoch
        if self.kafka_listeners:
            fields["kafka_listeners"] = dict(self.kafka_listeners)
        return dump_record(_RECORD_VERSION, fields)

    @classmethod
    def from_bytes(cls, data: bytes) -> OwnerRecord:
        """Decode; an unreadable record is an owner with no known address (never a crash)."""
        try:
            fields = load_record(data, "owner record", (_RECORD_VERSION,), legacy_key="version")
            listeners = fields.get("kafka_listeners", {})
            return cls(str(fields["id"]), str(fields.get("address", "")),
                       str(fields.get("incarnation", "")), str(fields.get("kafka", "")),
                       int(fields.get("epoch", 0)),
                       tuple((str(name), str(address)) for name, address in listeners.items()))
        except (ValueError, KeyError, TypeError, AttributeError):
            return cls("", "")
