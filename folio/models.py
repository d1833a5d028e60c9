"""The SDK's value objects: topics, segments, write results and events.

Everything here is immutable and plain, except :class:`Event`, a ``__slots__``
class a reader makes once per event and therefore kept as cheap to build as a
Python object can be. The ``*_from_proto`` functions are the only place that
knows the ``folio.v1`` admin messages' shape.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Generic, Literal, TypeVar

from folio.api.v1 import admin_pb2
from folio.errors import DeserializationError

__all__ = [
    "NO_HEADERS",
    "BrokerInfo",
    "ClusterInfo",
    "DeserializationPolicy",
    "Event",
    "ScaleResult",
    "SegmentInfo",
    "SegmentLedger",
    "SegmentRange",
    "TopicConfig",
    "TopicInfo",
    "UndecodedEvent",
    "WriteResult",
    "cluster_info_from_proto",
    "scale_result_from_proto",
    "segment_info_from_proto",
    "segment_range_from_proto",
    "topic_info_from_proto",
]

T = TypeVar("T")

#: The headers of every event read without any: one shared, read-only empty mapping
#: (no dict made per event).
NO_HEADERS: Mapping[str, bytes] = MappingProxyType({})

#: The names of TopicConfig's fields, which are also the proto's.
TOPIC_CONFIG_FIELDS = (
    "retention_ms", "retention_bytes", "max_event_bytes", "ledger_rollover_bytes",
    "ledger_rollover_ms", "scale_target_events_per_s", "scale_min_segments", "scale_cooldown_ms",
)


@dataclass(frozen=True, slots=True)
class TopicConfig:
    """A topic's configuration, every value in force.

    Attributes:
        retention_ms: delete whole ledgers whose newest event is older; -1 keeps forever.
        retention_bytes: delete the oldest ledgers while a segment holds more; -1: no limit.
        max_event_bytes: the largest event payload accepted.
        ledger_rollover_bytes: roll a segment to a new ledger past this size.
        ledger_rollover_ms: roll a segment to a new ledger past this age.
        scale_target_events_per_s: auto-scaling's event rate per segment; 0: off.
        scale_min_segments: auto-scaling never merges below this many open segments.
        scale_cooldown_ms: auto-scaling changes the topic at most once per this long.
    """

    retention_ms: int
    retention_bytes: int
    max_event_bytes: int
    ledger_rollover_bytes: int
    ledger_rollover_ms: int
    scale_target_events_per_s: int = 0
    scale_min_segments: int = 1
    scale_cooldown_ms: int = 60_000


@dataclass(frozen=True, slots=True)
class SegmentRange:
    """A segment, the key range it owns and its offsets.

    Attributes:
        name: ``"<topic>/<number>"``.
        number: the segment's number within its topic.
        key_low: the low end of its key range (inclusive).
        key_high: the high end of its key range (exclusive).
        sealed: whether it takes no more appends.
        start_offset: the offset of its first readable event.
        end_offset: the offset its next appended event will get (final once sealed).
        predecessors: the segments sealed when it was created whose ranges
            overlap its own (empty for a topic's first segments).
        successors: the segments created when it was sealed (empty while
            open, or when ``Client.seal_topic`` sealed it).
        owner: the ``host:port`` of the broker serving it when the answer
            was made (a standalone: itself), empty while none does or from
            a broker that does not say; a cluster moves segments between
            brokers, so it is a hint the client follows, not part of the
            segment's identity (equality ignores it).

    The admin calls that list active segments only (``get_topic``,
    ``get_segments`` without ``include_sealed``) leave ``successors`` empty.
    """

    name: str
    number: int
    key_low: float
    key_high: float
    sealed: bool
    start_offset: int
    end_offset: int
    predecessors: tuple[str, ...] = ()
    successors: tuple[str, ...] = ()
    owner: str = field(default="", compare=False)

    @property
    def length(self) -> int:
        """How many offsets are readable: ``end_offset - start_offset``."""
        return self.end_offset - self.start_offset

    def owns(self, point: float) -> bool:
        """Whether a routing key hashed to ``point`` belongs to this segment's range."""
        return self.key_low <= point < self.key_high


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """A topic as the broker knows it.

    Attributes:
        name: the topic's name.
        config: its configuration in force.
        segments: its active segments, ordered by ``key_low``.
        created_ms: when it was created, ms since the Unix epoch.
        sealed: whether ``Client.seal_topic`` sealed it (it takes no more events).
    """

    name: str
    config: TopicConfig
    segments: tuple[SegmentRange, ...]
    created_ms: int
    sealed: bool = False


@dataclass(frozen=True, slots=True)
class ScaleResult:
    """What ``Client.scale_topic`` did.

    Attributes:
        sealed: the segments sealed (with their final ``end_offset``), by ``key_low``.
        created: the segments created, by ``key_low``, each with its predecessors.
    """

    sealed: tuple[SegmentRange, ...]
    created: tuple[SegmentRange, ...]


@dataclass(frozen=True, slots=True)
class SegmentLedger:
    """One ledger of a segment's chain.

    Attributes:
        ledger_id: the ledger's id in the ledger service.
        first_offset: the offset of its first event.
        closed: whether it is closed (all but the last one are).
    """

    ledger_id: int
    first_offset: int
    closed: bool


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    """One segment's offsets, state and ledgers.

    Attributes:
        segment: the segment with its key range and offsets.
        ledgers: its ledgers, oldest first.
        length_bytes: bytes held by its ledgers (entry headers included).
    """

    segment: SegmentRange
    ledgers: tuple[SegmentLedger, ...]
    length_bytes: int

    @property
    def sealed(self) -> bool:
        """Whether the segment is sealed."""
        return self.segment.sealed


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """One live broker of a cluster (``Client.describe_cluster``).

    Attributes:
        broker_id: its stable identity (its registration name).
        address: where clients reach it, ``host:port``.
        containers: the segment containers it serves now, ascending (a
            standalone: none; it serves every segment).
    """

    broker_id: str
    address: str
    containers: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class ClusterInfo:
    """Who serves what: the live brokers and their segment containers.

    Attributes:
        brokers: the live brokers, by id.
        container_count: the cluster's number of segment containers (a
            standalone: 0). A segment belongs to the container its name
            hashes to; each segment's owner is also on ``SegmentRange.owner``.
    """

    brokers: tuple[BrokerInfo, ...]
    container_count: int

    @property
    def unowned_containers(self) -> tuple[int, ...]:
        """Containers no live broker serves now (being handed over, or no broker up)."""
        owned = {c for broker in self.brokers for c in broker.containers}
        return tuple(c for c in range(self.container_count) if c not in owned)


def cluster_info_from_proto(answer: admin_pb2.ListBrokersResponse) -> ClusterInfo:
    """The SDK model of a ``ListBrokersResponse``."""
    return ClusterInfo(tuple(BrokerInfo(b.id, b.address, tuple(b.containers))
                             for b in answer.brokers), answer.container_count)


@dataclass(frozen=True, slots=True)
class WriteResult:
    """Where a written event went.

    Attributes:
        segment: the segment's name.
        offset: the event's offset in it; -1 when the broker answered the
            event's block as a duplicate of an earlier append whose
            acknowledgement was lost (the event is stored, at an offset the
            broker did not repeat).
    """

    segment: str
    offset: int


class Event(Generic[T]):
    """One event read from a topic.

    Attributes:
        payload: the deserialized payload.
        routing_key: its routing key, or None for an event written without one.
        segment: the segment it was read from.
        offset: its offset in that segment.
        timestamp: its time in ms since the Unix epoch as the writer set it, or None.
        headers: its application headers, read-only (``NO_HEADERS``, one shared
            empty mapping, when it has none).
    """

    __slots__ = ("headers", "offset", "payload", "routing_key", "segment", "timestamp")

    def __init__(self, payload: T, routing_key: str | None, segment: str, offset: int,
                 timestamp: int | None, headers: Mapping[str, bytes]) -> None:
        self.payload = payload
        self.routing_key = routing_key
        self.segment = segment
        self.offset = offset
        self.timestamp = timestamp
        self.headers = headers

    def __repr__(self) -> str:
        return (f"Event(payload={self.payload!r}, routing_key={self.routing_key!r}, "
                f"segment={self.segment!r}, offset={self.offset}, "
                f"timestamp={self.timestamp}, headers={self.headers!r})")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Event):
            return NotImplemented
        return (self.payload == other.payload and self.routing_key == other.routing_key
                and self.segment == other.segment and self.offset == other.offset
                and self.timestamp == other.timestamp and self.headers == other.headers)

    __hash__ = None  # type: ignore[assignment]  # mutable, compared by value


#: What a reader does with a payload its serializer cannot decode: ``"raise"``
#: ``DeserializationError`` and stay on the event (the default), ``"skip"`` it
#: (logged at WARNING, the error with it), or return it ``"raw"``: an
#: :class:`UndecodedEvent` whose payload is the bytes.
DeserializationPolicy = Literal["raise", "skip", "raw"]


class UndecodedEvent(Event[bytes]):
    """An event whose payload the reader's serializer could not decode, handed over raw.

    Returned instead of raising with ``on_deserialization_error="raw"``:
    ``payload`` is the bytes as stored, ``error`` the ``DeserializationError``
    the serializer's failure became (it names the topic, segment and offset).
    """

    __slots__ = ("error",)

    def __init__(self, event: Event[bytes], error: DeserializationError) -> None:
        super().__init__(event.payload, event.routing_key, event.segment, event.offset,
                         event.timestamp, event.headers)
        self.error = error

    def __repr__(self) -> str:
        return f"Undecoded{super().__repr__()}"


def topic_config_from_proto(config: admin_pb2.TopicConfig) -> TopicConfig:
    """A ``TopicConfig`` from its proto (every field set, as in responses)."""
    return TopicConfig(
        retention_ms=config.retention_ms,
        retention_bytes=config.retention_bytes,
        max_event_bytes=config.max_event_bytes,
        ledger_rollover_bytes=config.ledger_rollover_bytes,
        ledger_rollover_ms=config.ledger_rollover_ms,
        scale_target_events_per_s=config.scale_target_events_per_s,
        scale_min_segments=config.scale_min_segments,
        scale_cooldown_ms=config.scale_cooldown_ms,
    )


def segment_range_from_proto(segment: admin_pb2.Segment) -> SegmentRange:
    """A ``SegmentRange`` from a ``folio.v1.Segment``."""
    return SegmentRange(
        name=segment.name,
        number=segment.number,
        key_low=segment.key_low,
        key_high=segment.key_high,
        sealed=segment.state == admin_pb2.SEGMENT_STATE_SEALED,
        start_offset=segment.start_offset,
        end_offset=segment.end_offset,
        predecessors=tuple(segment.predecessors),
        successors=tuple(segment.successors),
        owner=segment.owner,
    )


def scale_result_from_proto(response: admin_pb2.ScaleTopicResponse) -> ScaleResult:
    """A ``ScaleResult`` from a ``folio.v1.ScaleTopicResponse``."""
    return ScaleResult(
        sealed=tuple(segment_range_from_proto(s) for s in response.sealed),
        created=tuple(segment_range_from_proto(s) for s in response.created),
    )


def topic_info_from_proto(topic: admin_pb2.Topic) -> TopicInfo:
    """A ``TopicInfo`` from a ``folio.v1.Topic``."""
    return TopicInfo(
        name=topic.name,
        config=topic_config_from_proto(topic.config),
        segments=tuple(segment_range_from_proto(s) for s in topic.segments),
        created_ms=topic.created_ms,
        sealed=topic.sealed,
    )


def segment_info_from_proto(info: admin_pb2.SegmentInfo) -> SegmentInfo:
    """A ``SegmentInfo`` from a ``folio.v1.SegmentInfo``."""
    segment = segment_range_from_proto(info.segment)
    if info.sealed and not segment.sealed:
        segment = replace(segment, sealed=True)
    return SegmentInfo(
        segment=segment,
        ledgers=tuple(SegmentLedger(ledger.ledger_id, ledger.first_offset, ledger.closed)
                      for ledger in info.ledgers),
        length_bytes=info.length_bytes,
    )
