"""The topic's persisted metadata record: its configuration and every segment ever made.

A JSON object carrying ``format_version`` (framing: ``ledger.records``),
stored at ``broker.segments.names.topic_path`` and changed only by
compare-and-set on the node's version. Written in format 2, which adds each
segment's predecessors (scaling), the topic's ``sealed`` flag and when it last
scaled itself; format 1 records are still read.

``topic_id`` (the topic's Kafka id, a UUID in its canonical text form) is an
optional key of format 2: records written by earlier builds have none, and
are given one by the first reader that needs it (``TopicCatalog.topic_id``),
by compare-and-set, so every broker and every restart agree on it. Earlier
builds read records carrying it (they ignore unknown keys).
"""

from __future__ import annotations

import uuid
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from broker.api import SegmentState, TopicConfig
from broker.errors import CorruptDataError
from broker.segments.records import dump_record, load_record

__all__ = ["FORMAT_VERSION", "TopicRecord", "TopicSegment", "config_from_json"]

#: The topic record format written (1 is still read: no scaling fields).
FORMAT_VERSION = 2
_TOPIC_FORMATS = (1, FORMAT_VERSION)


@dataclass(frozen=True, slots=True)
class TopicSegment:
    """A segment as its topic lists it: number, key range ``[key_low, key_high)``, state.

    ``predecessors``: the numbers of the segments sealed when it was made whose
    ranges overlap its own (empty for a topic's first segments).
    """

    number: int
    key_low: float
    key_high: float
    state: SegmentState = SegmentState.OPEN
    predecessors: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class TopicRecord:
    """A topic: its configuration, its segments (every one ever made) and counters.

    ``sealed``: SealTopic sealed it. ``scaled_ms``: when auto-scaling last
    changed it (0: never). ``topic_id``: its Kafka topic id ("": none yet,
    a record of an earlier build).
    """

    name: str
    config: TopicConfig
    segments: tuple[TopicSegment, ...]
    next_segment_number: int
    created_ms: int
    sealed: bool = False
    scaled_ms: int = 0
    topic_id: str = ""

    def with_config(self, config: TopicConfig) -> TopicRecord:
        """The same record with another configuration."""
        return replace(self, config=config)

    def to_bytes(self) -> bytes:
        """The record as stored."""
        data: dict[str, Any] = {
            "name": self.name,
            "config": asdict(self.config),
            "segments": [
                {"number": s.number, "key_low": s.key_low, "key_high": s.key_high,
                 "state": s.state.value, "predecessors": list(s.predecessors)}
                for s in self.segments
            ],
            "next_segment_number": self.next_segment_number,
            "created_ms": self.created_ms,
            "sealed": self.sealed,
            "scaled_ms": self.scaled_ms,
        }
        if self.topic_id:
            data["topic_id"] = self.topic_id
        return dump_record(FORMAT_VERSION, data)

    @classmethod
    def from_bytes(cls, data: bytes) -> TopicRecord:
        """Decode a stored record; ``CorruptDataError`` if it is not one."""
        record = load_record(data, "topic record", _TOPIC_FORMATS)
        try:
            return cls(
                name=str(record["name"]),
                config=config_from_json(record["config"]),
                segments=tuple(
                    TopicSegment(int(s["number"]), float(s["key_low"]), float(s["key_high"]),
                                 SegmentState(s["state"]),
                                 tuple(int(p) for p in s.get("predecessors", ())))
                    for s in record["segments"]
                ),
                next_segment_number=int(record["next_segment_number"]),
                created_ms=int(record["created_ms"]),
                sealed=bool(record.get("sealed", False)),
                scaled_ms=int(record.get("scaled_ms", 0)),
                topic_id=_topic_id(record.get("topic_id", "")),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise CorruptDataError(f"topic record is malformed: {error!r}",
                                   what="topic record") from None


def _topic_id(value: Any) -> str:
    """A stored topic id in canonical form ("" for none); ``ValueError`` if not a UUID."""
    if value in ("", None):
        return ""
    return str(uuid.UUID(str(value)))


def config_from_json(values: Any) -> TopicConfig:
    """A ``TopicConfig`` from its stored form (``ValueError`` on bad values)."""
    if not isinstance(values, dict):
        raise TypeError("config must be an object")
    names = {f.name for f in fields(TopicConfig)}
    return TopicConfig(**{k: int(v) for k, v in values.items() if k in names})
