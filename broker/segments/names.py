"""Names of topics and segments, and where their records live in the metadata store.

A topic name is 1 to 249 characters of ``[A-Za-z0-9._-]`` and does not start
with ``_`` or ``.``; names starting with ``_`` are reserved for the broker's own
system topics (``_txnlog``), which only the broker creates (``internal=True``).
A segment is named ``"<topic>/<number>"``, its number within the topic.
"""

from __future__ import annotations

import re

from broker.errors import NoSuchSegmentError, TopicNameError
from broker.metadata_paths import SEGMENTS_ROOT, TOPICS_ROOT

__all__ = [
    "MAX_SEGMENT_NAME_CHARS",
    "MAX_TOPIC_NAME_CHARS",
    "SEGMENTS_ROOT",
    "TOPICS_ROOT",
    "check_topic_name",
    "is_system_topic",
    "make_segment_name",
    "parse_segment_name",
    "segment_path",
    "segments_path",
    "topic_path",
]

MAX_TOPIC_NAME_CHARS = 249
#: ``"<topic>/<number>"``: a topic name, a slash and up to 10 digits.
MAX_SEGMENT_NAME_CHARS = MAX_TOPIC_NAME_CHARS + 11

_TOPIC_CHARS = re.compile(r"[A-Za-z0-9._-]+")
_SEGMENT_NAME = re.compile(r"([A-Za-z0-9_-][A-Za-z0-9._-]{0,248})/(0|[1-9][0-9]{0,9})")


def is_system_topic(name: str) -> bool:
    """Whether ``name`` is in the reserved, broker-only namespace (``_`` prefix)."""
    return name.startswith("_")


def check_topic_name(name: str, *, internal: bool = False) -> None:
    """Raise ``TopicNameError`` unless ``name`` is a valid topic name.

    Args:
        name: the proposed name.
        internal: allow a system topic name (``_`` prefix); only the broker passes it.
    """
    if not 1 <= len(name) <= MAX_TOPIC_NAME_CHARS:
        raise TopicNameError(
            f"topic name must be 1 to {MAX_TOPIC_NAME_CHARS} characters, got {len(name)}")
    if _TOPIC_CHARS.fullmatch(name) is None:
        raise TopicNameError(f"topic name {name!r} may only hold characters of [A-Za-z0-9._-]")
    if name.startswith("."):
        raise TopicNameError(f"topic name {name!r} must not start with '.'")
    if is_system_topic(name) and not internal:
        raise TopicNameError(
            f"topic name {name!r} must not start with '_' (reserved for system topics)")


def make_segment_name(topic: str, number: int) -> str:
    """``"<topic>/<number>"``."""
    return f"{topic}/{number}"


def parse_segment_name(name: str) -> tuple[str, int]:
    """Split ``"<topic>/<number>"``; ``NoSuchSegmentError`` if it is not such a name."""
    match = _SEGMENT_NAME.fullmatch(name)
    if match is None:
        raise NoSuchSegmentError(
            name, f"segment {name!r} does not exist (segment names are '<topic>/<number>')")
    return match.group(1), int(match.group(2))


def topic_path(topic: str) -> str:
    """The metadata path of the topic's record."""
    return f"{TOPICS_ROOT}/{topic}"


def segments_path(topic: str) -> str:
    """The metadata path under which the topic's segment records live."""
    return f"{SEGMENTS_ROOT}/{topic}"


def segment_path(topic: str, number: int) -> str:
    """The metadata path of one segment's record."""
    return f"{SEGMENTS_ROOT}/{topic}/{number}"
