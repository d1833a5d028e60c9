"""Names of topics and segments, and where their records live in the metadata store.

A topic name follows Kafka's rule (``org.apache.kafka.common.internals.Topic``):
1 to 249 characters of ``[A-Za-z0-9._-]``, and not ``.`` or ``..``. So
``_schemas``, ``_confluent-metrics``, ``.hidden`` and ``__consumer_offsets``
are user topics like any other.

Kafka refuses a name that differs from an existing one only by ``.`` against
``_`` (``a.b`` beside ``a_b``), because its JMX metric names turn ``.`` into
``_``; Folio does not: its metrics carry the topic as a Prometheus label,
verbatim, so the two never collide (docs/kafka.md, "Topic names").

Folio's own system topics (the broker's state) are reserved: every name
starting with ``__folio_`` (``SYSTEM_TOPIC_PREFIX``; Kafka's internal topics
start with ``__`` and no Kafka tool makes ``__folio_`` names), and the five
names earlier builds gave them, kept as they are (``LEGACY_SYSTEM_TOPICS``:
``_txnlog`` ...). Those five keep their names rather than being renamed,
because a segment's name is data, not a label: it picks the segment's
container (``broker.cluster.containers``, a rule clients compute too), and
it is written in the transaction log, the snapshots' keys and every segment
record, so a rename would be an offline migration of every cluster for no
gain to users. A broker of this build therefore reads the data of an earlier
one as it is (``tests/integration/test_topic_names_upgrade.py``). Only the
broker creates or writes system topics (``internal=True``).

A segment is named ``"<topic>/<number>"``, its number within the topic.
"""

from __future__ import annotations

import re

from broker.errors import NoSuchSegmentError, TopicNameError
from broker.metadata_paths import SEGMENTS_ROOT, TOPICS_ROOT

__all__ = [
    "LEGACY_SYSTEM_TOPICS",
    "MAX_SEGMENT_NAME_CHARS",
    "MAX_TOPIC_NAME_CHARS",
    "SEGMENTS_ROOT",
    "SYSTEM_TOPIC_PREFIX",
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
#: The prefix of Folio's system topics (new ones; the five below predate it).
SYSTEM_TOPIC_PREFIX = "__folio_"
#: The system topics named before ``SYSTEM_TOPIC_PREFIX``: the transaction log,
#: the commit keys, the transaction buffers' snapshots, the Kafka listener's
#: committed offsets and transactional ids. Reserved by exact name.
LEGACY_SYSTEM_TOPICS = frozenset({
    "_txnlog", "_txncommitkeys", "_txnbuffer_snapshots", "_kafka_offsets", "_kafka_txn_state"})

_TOPIC_CHARS = re.compile(r"[A-Za-z0-9._-]+")
_SEGMENT_NAME = re.compile(r"([A-Za-z0-9._-]{1,249})/(0|[1-9][0-9]{0,9})")


def is_system_topic(name: str) -> bool:
    """Whether ``name`` is one of Folio's system topics (reserved for the broker)."""
    return name.startswith(SYSTEM_TOPIC_PREFIX) or name in LEGACY_SYSTEM_TOPICS


def check_topic_name(name: str, *, internal: bool = False) -> None:
    """Raise ``TopicNameError`` unless ``name`` is a valid topic name (Kafka's rule).

    Args:
        name: the proposed name.
        internal: allow a system topic name (``is_system_topic``); only the broker passes it.
    """
    if not 1 <= len(name) <= MAX_TOPIC_NAME_CHARS:
        raise TopicNameError(
            f"topic name must be 1 to {MAX_TOPIC_NAME_CHARS} characters, got {len(name)}")
    if name in (".", ".."):
        raise TopicNameError(f"topic name cannot be {name!r}")
    if _TOPIC_CHARS.fullmatch(name) is None:
        raise TopicNameError(f"topic name {name!r} may only hold characters of [A-Za-z0-9._-]")
    if is_system_topic(name) and not internal:
        raise TopicNameError(
            f"topic name {name!r} is reserved for Folio's system topics (names starting "
            f"with {SYSTEM_TOPIC_PREFIX!r}, and {', '.join(sorted(LEGACY_SYSTEM_TOPICS))})")


def make_segment_name(topic: str, number: int) -> str:
    """``"<topic>/<number>"``."""
    return f"{topic}/{number}"


def parse_segment_name(name: str) -> tuple[str, int]:
    """Split ``"<topic>/<number>"``; ``NoSuchSegmentError`` if it is not such a name."""
    match = _SEGMENT_NAME.fullmatch(name)
    if match is None or match.group(1) in (".", ".."):
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
