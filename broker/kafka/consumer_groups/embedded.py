"""The consumer protocol embedded in classic JoinGroup and SyncGroup (Kafka's ``ConsumerProtocol``).

A classic member of protocol type ``consumer`` carries, in each protocol's
metadata of its JoinGroup, a ConsumerProtocolSubscription, and gets in its
SyncGroup a ConsumerProtocolAssignment. When such a member is inside a
consumer-protocol group (KIP-848's online upgrade, ``mixed``) the broker
reads the one and writes the other itself, as Kafka's coordinator does.

The layouts (big-endian, not flexible; every version a prefix of the next):

- Subscription: int16 version; topics (int32 count of int16-length strings);
  user data (int32 length, -1 null); v1+: owned partitions (int32 count of
  a topic string and an int32 array); v2+: generation id (int32); v3+: rack
  id (int16 length, -1 null). A version above 3 is read as 3 (later fields
  are appended, as Kafka's readers do).
- Assignment (v0-v3 alike): int16 version; partitions (as owned above);
  user data (int32 length, -1 null: written null).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

__all__ = ["EmbeddedSubscription", "MalformedEmbeddedError", "decode_assignment",
           "decode_subscription", "encode_assignment", "version_of"]

#: The highest Subscription and Assignment version this side writes.
_MAX_VERSION = 3


class MalformedEmbeddedError(ValueError):
    """The embedded consumer protocol bytes cannot be read (not retriable: the client's bytes)."""

    retriable = False


@dataclass(frozen=True, slots=True)
class EmbeddedSubscription:
    """What a classic consumer's JoinGroup metadata says."""

    version: int
    topics: tuple[str, ...]
    owned: dict[str, set[int]]
    rack_id: str | None = None


class _Reader:
    def __init__(self, data: bytes) -> None:
        self._data = data
        self._at = 0

    def _take(self, fmt: str) -> int:
        try:
            (value,) = struct.unpack_from(fmt, self._data, self._at)
        except struct.error as error:
            raise MalformedEmbeddedError(f"cut short at byte {self._at}") from error
        self._at += struct.calcsize(fmt)
        return int(value)

    def int16(self) -> int:
        return self._take(">h")

    def int32(self) -> int:
        return self._take(">i")

    def string(self) -> str | None:
        size = self.int16()
        if size < 0:
            return None
        raw = self._data[self._at:self._at + size]
        if len(raw) != size:
            raise MalformedEmbeddedError(f"a string cut short at byte {self._at}")
        self._at += size
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise MalformedEmbeddedError("a string that is not UTF-8") from error

    def skip_bytes(self) -> None:
        size = self.int32()
        if size > 0:
            if self._at + size > len(self._data):
                raise MalformedEmbeddedError(f"bytes cut short at byte {self._at}")
            self._at += size

    def count(self) -> int:
        size = self.int32()
        if size < -1 or size > len(self._data):
            raise MalformedEmbeddedError(f"an array of {size} items")
        return max(size, 0)

    def partitions(self) -> dict[str, set[int]]:
        found: dict[str, set[int]] = {}
        for _ in range(self.count()):
            topic = self.string()
            if topic is None:
                raise MalformedEmbeddedError("a null topic name")
            found.setdefault(topic, set()).update(self.int32() for _ in range(self.count()))
        return found

    @property
    def done(self) -> bool:
        return self._at >= len(self._data)


def version_of(metadata: bytes) -> int:
    """The version a Subscription was written in (0 if unreadable), capped at 3."""
    if len(metadata) < 2:
        return 0
    (version,) = struct.unpack_from(">h", metadata, 0)
    return min(max(int(version), 0), _MAX_VERSION)


def decode_subscription(metadata: bytes) -> EmbeddedSubscription:
    """Read a ConsumerProtocolSubscription; ``MalformedEmbeddedError`` if it cannot be."""
    reader = _Reader(metadata)
    version = reader.int16()
    if version < 0:
        raise MalformedEmbeddedError(f"subscription version {version}")
    topics: list[str] = []
    for _ in range(reader.count()):
        topic = reader.string()
        if topic is None:
            raise MalformedEmbeddedError("a null topic name")
        topics.append(topic)
    reader.skip_bytes()  # user data: the client-side assignor's, not read here
    owned: dict[str, set[int]] = {}
    rack: str | None = None
    if version >= 1 and not reader.done:
        owned = reader.partitions()
    if version >= 2 and not reader.done:
        reader.int32()  # generation id: the member's epoch is the coordinator's
    if version >= 3 and not reader.done:
        rack = reader.string()
    return EmbeddedSubscription(version, tuple(topics), owned, rack)


def decode_assignment(data: bytes) -> dict[str, set[int]]:
    """The partitions of a ConsumerProtocolAssignment (b"": none); ``MalformedEmbeddedError``."""
    if not data:
        return {}
    reader = _Reader(data)
    reader.int16()
    return reader.partitions()


def encode_assignment(partitions: dict[str, set[int]], version: int) -> bytes:
    """A ConsumerProtocolAssignment of ``partitions`` in ``version`` (0-3), user data null."""
    parts = [struct.pack(">hi", min(max(version, 0), _MAX_VERSION),
                         sum(1 for numbers in partitions.values() if numbers))]
    for topic in sorted(partitions):
        numbers = sorted(partitions[topic])
        if not numbers:
            continue
        name = topic.encode("utf-8")
        parts.append(struct.pack(f">h{len(name)}si{len(numbers)}i", len(name), name,
                                 len(numbers), *numbers))
    parts.append(struct.pack(">i", -1))
    return b"".join(parts)
