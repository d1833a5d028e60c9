"""Points in topics: stream cuts, reader positions and group checkpoints.

All three are immutable, serialisable (``to_bytes``/``from_bytes`` as the
``folio.v1`` messages of groups.proto, so any language reads them; and
``to_json``/``from_json``) and map segment names (``"<topic>/<number>"``) to
the offset of the next event to read.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from google.protobuf.message import DecodeError

from folio.api.v1 import groups_pb2
from folio.errors import InvalidArgumentError

__all__ = ["Checkpoint", "FutureSegment", "Position", "StreamCut"]


def _frozen(positions: Mapping[str, int]) -> Mapping[str, int]:
    for segment, offset in positions.items():
        if not isinstance(segment, str) or "/" not in segment:
            raise InvalidArgumentError(f"{segment!r} is not a segment name ('<topic>/<number>')")
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise InvalidArgumentError(f"offset {offset!r} of {segment!r} is not an int >= 0")
    return MappingProxyType(dict(sorted(positions.items())))


def _offsets(items: object) -> dict[str, int]:
    return {item.segment: item.offset for item in items}  # type: ignore[attr-defined]


def _offset_messages(positions: Mapping[str, int]) -> list[groups_pb2.SegmentOffset]:
    return [groups_pb2.SegmentOffset(segment=s, offset=o) for s, o in positions.items()]


def _parse(message: object, data: bytes, what: str) -> None:
    try:
        message.ParseFromString(data)  # type: ignore[attr-defined]
    except DecodeError:
        raise InvalidArgumentError(f"the bytes are not a serialised {what}") from None


@dataclass(frozen=True, slots=True)
class StreamCut:
    """An offset per segment of one or more topics.

    A *valid* cut covers each topic's key space exactly once: e.g. a topic's
    active segments (``"latest"``), its first segments (``"earliest"``), or
    the positions of a checkpoint. Reader groups start at a cut; batch reads
    list the segments between two cuts.

    Attributes:
        positions: segment name -> offset of the next event.
    """

    positions: Mapping[str, int]

    def __post_init__(self) -> None:
        object.__setattr__(self, "positions", _frozen(self.positions))

    @property
    def topics(self) -> list[str]:
        """The topics the cut names, sorted."""
        return sorted({segment.rsplit("/", 1)[0] for segment in self.positions})

    def to_bytes(self) -> bytes:
        """A serialised ``folio.v1.StreamCut``."""
        return groups_pb2.StreamCut(positions=_offset_messages(self.positions)) \
            .SerializeToString()

    @classmethod
    def from_bytes(cls, data: bytes) -> StreamCut:
        """The cut ``to_bytes`` made. ``InvalidArgumentError`` for other bytes."""
        message = groups_pb2.StreamCut()
        _parse(message, data, "folio.v1.StreamCut")
        return cls(_offsets(message.positions))

    def to_json(self) -> str:
        """``{"positions": {segment: offset}}``."""
        return json.dumps({"positions": dict(self.positions)}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> StreamCut:
        """The cut ``to_json`` made. ``InvalidArgumentError`` for other text."""
        try:
            return cls(dict(json.loads(text)["positions"]))
        except (ValueError, KeyError, TypeError):
            raise InvalidArgumentError("the text is not a StreamCut's JSON") from None


@dataclass(frozen=True, slots=True)
class Position:
    """Where one reader of a group is: the next offset of every segment it holds.

    Every event a group reader returns carries the position just after it.
    Persist the last one with what you did with the event; after a crash
    give it to ``ReaderGroup.reader_offline`` so the group goes on right
    after it.
    """

    reader_id: str
    positions: Mapping[str, int]

    def __post_init__(self) -> None:
        object.__setattr__(self, "positions", _frozen(self.positions))

    def to_bytes(self) -> bytes:
        """A serialised ``folio.v1.ReaderPosition``."""
        return groups_pb2.ReaderPosition(
            reader_id=self.reader_id,
            positions=_offset_messages(self.positions)).SerializeToString()

    @classmethod
    def from_bytes(cls, data: bytes) -> Position:
        """The position ``to_bytes`` made. ``InvalidArgumentError`` for other bytes."""
        message = groups_pb2.ReaderPosition()
        _parse(message, data, "folio.v1.ReaderPosition")
        return cls(message.reader_id, _offsets(message.positions))


@dataclass(frozen=True, slots=True)
class FutureSegment:
    """A successor not yet readable: it waits for predecessors to be read to their end."""

    segment: str
    start_offset: int
    waiting_for: tuple[str, ...]

    def to_proto(self) -> groups_pb2.FutureSegment:
        """As a ``folio.v1.FutureSegment``."""
        return groups_pb2.FutureSegment(segment=self.segment, start_offset=self.start_offset,
                                        waiting_for=list(self.waiting_for))

    @classmethod
    def from_proto(cls, message: groups_pb2.FutureSegment) -> FutureSegment:
        """From a ``folio.v1.FutureSegment``."""
        return cls(message.segment, message.start_offset, tuple(sorted(message.waiting_for)))


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A consistent point of a reader group, made by ``ReaderGroup.initiate_checkpoint``.

    Every reader delivered a checkpoint event at this point: the events
    before it were returned before that event, the ones after it after.
    Starting a new group from it (``Client.reader_group(..., start=cp)``) or
    ``ReaderGroup.reset(cp)`` reads exactly the events after it.

    Attributes:
        group: the group that made it.
        name: its name.
        positions: segment -> next offset, for every segment the group
            still had to read (held or free).
        future: successors still waiting for predecessors then.
        topics: the group's topics.
    """

    group: str
    name: str
    positions: Mapping[str, int]
    future: tuple[FutureSegment, ...] = ()
    topics: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        object.__setattr__(self, "positions", _frozen(self.positions))

    @property
    def stream_cut(self) -> StreamCut:
        """Its positions as a cut (without the waiting successors)."""
        return StreamCut(self.positions)

    def to_proto(self) -> groups_pb2.Checkpoint:
        """As a ``folio.v1.Checkpoint``."""
        return groups_pb2.Checkpoint(
            group=self.group, name=self.name, positions=_offset_messages(self.positions),
            future=[f.to_proto() for f in self.future], topics=list(self.topics))

    @classmethod
    def from_proto(cls, message: groups_pb2.Checkpoint) -> Checkpoint:
        """From a ``folio.v1.Checkpoint``."""
        return cls(message.group, message.name, _offsets(message.positions),
                   tuple(FutureSegment.from_proto(f) for f in message.future),
                   tuple(message.topics))

    def to_bytes(self) -> bytes:
        """A serialised ``folio.v1.Checkpoint``."""
        return self.to_proto().SerializeToString()

    @classmethod
    def from_bytes(cls, data: bytes) -> Checkpoint:
        """The checkpoint ``to_bytes`` made. ``InvalidArgumentError`` for other bytes."""
        message = groups_pb2.Checkpoint()
        _parse(message, data, "folio.v1.Checkpoint")
        return cls.from_proto(message)

    def to_json(self) -> str:
        """The checkpoint as a JSON object."""
        return json.dumps({
            "group": self.group, "name": self.name, "positions": dict(self.positions),
            "future": [{"segment": f.segment, "start_offset": f.start_offset,
                        "waiting_for": list(f.waiting_for)} for f in self.future],
            "topics": list(self.topics)}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Checkpoint:
        """The checkpoint ``to_json`` made. ``InvalidArgumentError`` for other text."""
        try:
            data = json.loads(text)
            return cls(str(data["group"]), str(data["name"]), dict(data["positions"]),
                       tuple(FutureSegment(str(f["segment"]), int(f["start_offset"]),
                                           tuple(f["waiting_for"])) for f in data["future"]),
                       tuple(data["topics"]))
        except (ValueError, KeyError, TypeError):
            raise InvalidArgumentError("the text is not a Checkpoint's JSON") from None
