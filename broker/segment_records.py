"""The broker's persisted metadata records: one per topic, one per segment.

Both are JSON objects carrying ``format_version`` (1), stored in the
``MetadataStore`` at ``broker.names.topic_path`` / ``segment_path`` and changed
only by compare-and-set on the node's version, so a broker that lost a
segment learns it from its failed CAS instead of overwriting its successor.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from broker.api import SegmentState, TopicConfig
from broker.errors import CorruptDataError

__all__ = [
    "FORMAT_VERSION",
    "LedgerRef",
    "SegmentRecord",
    "TopicRecord",
    "TopicSegment",
    "config_from_json",
]

FORMAT_VERSION = 1


@dataclass(frozen=True, slots=True)
class TopicSegment:
    """A segment as its topic lists it: number, key range ``[key_low, key_high)``, state."""

    number: int
    key_low: float
    key_high: float
    state: SegmentState = SegmentState.OPEN


@dataclass(frozen=True, slots=True)
class TopicRecord:
    """A topic: its configuration, its segments (every one ever made) and counters."""

    name: str
    config: TopicConfig
    segments: tuple[TopicSegment, ...]
    next_segment_number: int
    created_ms: int

    def with_config(self, config: TopicConfig) -> TopicRecord:
        """The same record with another configuration."""
        return replace(self, config=config)

    def to_bytes(self) -> bytes:
        """The record as stored."""
        return _dump({
            "format_version": FORMAT_VERSION,
            "name": self.name,
            "config": asdict(self.config),
            "segments": [
                {"number": s.number, "key_low": s.key_low, "key_high": s.key_high,
                 "state": s.state.value}
                for s in self.segments
            ],
            "next_segment_number": self.next_segment_number,
            "created_ms": self.created_ms,
        })

    @classmethod
    def from_bytes(cls, data: bytes) -> TopicRecord:
        """Decode a stored record; ``CorruptDataError`` if it is not one."""
        record = _load(data, "topic record")
        try:
            return cls(
                name=str(record["name"]),
                config=config_from_json(record["config"]),
                segments=tuple(
                    TopicSegment(int(s["number"]), float(s["key_low"]), float(s["key_high"]),
                                 SegmentState(s["state"]))
                    for s in record["segments"]
                ),
                next_segment_number=int(record["next_segment_number"]),
                created_ms=int(record["created_ms"]),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise CorruptDataError(f"topic record is malformed: {error!r}",
                                   what="topic record") from None


@dataclass(frozen=True, slots=True)
class LedgerRef:
    """One ledger of a segment's chain.

    Attributes:
        ledger_id: the ledger.
        first_offset: the offset of its first event (its end is the next one's first).
        length_bytes: its final length once closed, -1 while it is being written.
        last_entry_ms: the time of its newest entry once closed (-1: none or open).
    """

    ledger_id: int
    first_offset: int
    length_bytes: int = -1
    last_entry_ms: int = -1


@dataclass(frozen=True, slots=True)
class SegmentRecord:
    """A segment: its ledger chain (oldest first), start offset and seal.

    Every ledger but the last is closed; the last one is the one being written
    unless the segment is sealed. ``end_offset`` is set (>= 0) only when sealed.
    """

    topic: str
    number: int
    ledgers: tuple[LedgerRef, ...] = ()
    start_offset: int = 0
    sealed: bool = False
    end_offset: int = -1

    def to_bytes(self) -> bytes:
        """The record as stored."""
        return _dump({
            "format_version": FORMAT_VERSION,
            "topic": self.topic,
            "number": self.number,
            "ledgers": [[r.ledger_id, r.first_offset, r.length_bytes, r.last_entry_ms]
                        for r in self.ledgers],
            "start_offset": self.start_offset,
            "sealed": self.sealed,
            "end_offset": self.end_offset,
        })

    @classmethod
    def from_bytes(cls, data: bytes) -> SegmentRecord:
        """Decode a stored record; ``CorruptDataError`` if it is not one."""
        record = _load(data, "segment record")
        try:
            return cls(
                topic=str(record["topic"]),
                number=int(record["number"]),
                ledgers=tuple(LedgerRef(int(a), int(b), int(c), int(d))
                              for a, b, c, d in record["ledgers"]),
                start_offset=int(record["start_offset"]),
                sealed=bool(record["sealed"]),
                end_offset=int(record["end_offset"]),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise CorruptDataError(f"segment record is malformed: {error!r}",
                                   what="segment record") from None


def config_from_json(values: Any) -> TopicConfig:
    """A ``TopicConfig`` from its stored form (``ValueError`` on bad values)."""
    if not isinstance(values, dict):
        raise TypeError("config must be an object")
    names = {f.name for f in fields(TopicConfig)}
    return TopicConfig(**{k: int(v) for k, v in values.items() if k in names})


def _dump(record: dict[str, Any]) -> bytes:
    return json.dumps(record, separators=(",", ":"), sort_keys=True).encode("utf-8")


def _load(data: bytes, what: str) -> dict[str, Any]:
    try:
        record = json.loads(data)
    except (UnicodeDecodeError, ValueError):
        raise CorruptDataError(f"{what} is not JSON", what=what) from None
    if not isinstance(record, dict):
        raise CorruptDataError(f"{what} is not a JSON object", what=what)
    version = record.get("format_version")
    if version != FORMAT_VERSION:
        raise CorruptDataError(
            f"{what} has format version {version!r}; this broker reads {FORMAT_VERSION}",
            what=what)
    return record
