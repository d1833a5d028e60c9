"""The segment's persisted metadata record, and the broker's reader of the shared framing.

Records are JSON objects carrying ``format_version`` (``ledger.records``, the
framing every persisted record shares; ``load_record`` here answers an
unreadable one with ``CorruptDataError``), stored in the
``MetadataStore`` (a segment's at ``broker.segments.names.segment_path``) and
changed only by compare-and-set on the node's version, so a broker that lost
a segment learns it from its failed CAS instead of overwriting its successor.
The topic record is ``broker.topics.records``.

Segment records are written in format 2, which adds the writer snapshot
(``writers_ledger``, ``writers``: each writer's last event number and last
append time, covering at least every entry before ledger
``writers_ledger``); format 1 records (no snapshot) are still read. The
snapshot also keeps each writer's last appends (``writer_appends``: first
and last event number and base offset of each, at most ``RECENT_APPENDS``),
so that a resend is answered with the offset its first copy got after a
restart or a move, as a Kafka broker keeps its producers' last five batches
with the log; only for writers active within ``RECENT_APPENDS_KEPT_MS`` of
the newest one, as no producer resends later than that. A key of its own,
not a new format: a broker that does not know it reads the record and leaves
the appends out (their resends are then answered without an offset).

``leader_epochs`` (a key of its own too, left out while empty): the
segment's leader-epoch history, ``[[epoch, start_offset], ...]`` oldest
first (``broker.segments.epoch_history``). A broker of an earlier build
reads the record and drops the key at its next write; the history then
starts again at the next ownership (an earlier epoch is then answered with
an end at or after its true one, never before).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from broker.errors import CorruptDataError
from broker.segments.epoch_history import EpochHistory
from ledger import records
from ledger.records import dump_record

__all__ = [
    "RECENT_APPENDS",
    "RECENT_APPENDS_KEPT_MS",
    "SEGMENT_FORMAT_VERSION",
    "LedgerRecord",
    "RecentAppend",
    "SegmentRecord",
    "WriterState",
    "dump_record",
    "load_record",
]

#: The segment record format written (1 is still read: no writer snapshot).
SEGMENT_FORMAT_VERSION = 2
_SEGMENT_FORMATS = (1, SEGMENT_FORMAT_VERSION)
#: The appends remembered per writer (Kafka's broker keeps 5 batches per producer,
#: as many as a producer may have in flight).
RECENT_APPENDS = 5
#: One remembered append: (first event number, last event number, base offset).
RecentAppend = tuple[int, int, int]
#: The record keeps the last appends only of writers that appended within this
#: long before the newest writer did: a producer resends a batch only within its
#: delivery timeout (librdkafka's ``message.timeout.ms``: 5 min, Java's
#: ``delivery.timeout.ms``: 2 min, by default), and the record stays small with
#: many idle writers (~60 bytes a writer instead of ~215).
RECENT_APPENDS_KEPT_MS = 15 * 60 * 1000


@dataclass(frozen=True, slots=True)
class LedgerRecord:
    """One ledger of a segment's chain, as the segment record stores it.

    The persisted view: the broker holding the segment keeps it as a
    ``LedgerSpan`` (``offset_index``) and clients see it as a ``broker.api.SegmentLedger``.

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
class WriterState:
    """A writer's attribute on a segment: its last event number and when it last appended.

    ``recent``: its last appends (at most ``RECENT_APPENDS``, oldest first),
    each (first event number, last event number, base offset).
    """

    last_event_number: int
    last_update_ms: int
    recent: tuple[RecentAppend, ...] = ()


@dataclass(frozen=True, slots=True)
class SegmentRecord:
    """A segment: its ledger chain (oldest first), start offset, seal and writer snapshot.

    Every ledger but the last is closed; the last one is the one being written
    unless the segment is sealed. ``end_offset`` is set (>= 0) only when sealed.
    ``writers`` holds every writer's state as of (at least) the start of
    ledger ``writers_ledger`` (-1: no snapshot, a format 1 record); recovery
    applies the entry headers of that ledger on top. ``leader_epochs``: the
    start offset of each ownership's appends (``broker.segments.epoch_history``).
    """

    topic: str
    number: int
    ledgers: tuple[LedgerRecord, ...] = ()
    start_offset: int = 0
    sealed: bool = False
    end_offset: int = -1
    writers_ledger: int = -1
    writers: Mapping[str, WriterState] = field(default_factory=dict)
    leader_epochs: EpochHistory = field(default_factory=EpochHistory)

    def to_bytes(self) -> bytes:
        """The record as stored (format 2)."""
        newest = max((s.last_update_ms for s in self.writers.values()), default=0)
        kept_from = newest - RECENT_APPENDS_KEPT_MS
        fields: dict[str, Any] = {
            "topic": self.topic,
            "number": self.number,
            "ledgers": [[r.ledger_id, r.first_offset, r.length_bytes, r.last_entry_ms]
                        for r in self.ledgers],
            "start_offset": self.start_offset,
            "sealed": self.sealed,
            "end_offset": self.end_offset,
            "writers_ledger": self.writers_ledger,
            "writers": {w: [s.last_event_number, s.last_update_ms]
                        for w, s in self.writers.items()},
            "writer_appends": {w: [list(append) for append in s.recent]
                               for w, s in self.writers.items()
                               if s.recent and s.last_update_ms >= kept_from},
        }
        if self.leader_epochs.entries:
            fields["leader_epochs"] = self.leader_epochs.to_list()
        return dump_record(SEGMENT_FORMAT_VERSION, fields)

    @classmethod
    def from_bytes(cls, data: bytes) -> SegmentRecord:
        """Decode a stored record (format 1 or 2); ``CorruptDataError`` if it is not one."""
        record = load_record(data, "segment record", _SEGMENT_FORMATS)
        try:
            writers = record.get("writers", {})
            appends = record.get("writer_appends", {})
            if not isinstance(writers, dict) or not isinstance(appends, dict):
                raise TypeError("writers and writer_appends must be objects")
            return cls(
                topic=str(record["topic"]),
                number=int(record["number"]),
                ledgers=tuple(LedgerRecord(int(a), int(b), int(c), int(d))
                              for a, b, c, d in record["ledgers"]),
                start_offset=int(record["start_offset"]),
                sealed=bool(record["sealed"]),
                end_offset=int(record["end_offset"]),
                writers_ledger=int(record.get("writers_ledger", -1)),
                writers={str(w): WriterState(int(n), int(t), _recent(appends.get(w, ())))
                         for w, (n, t) in writers.items()},
                leader_epochs=EpochHistory.of(record.get("leader_epochs", ())),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise CorruptDataError(f"segment record is malformed: {error!r}",
                                   what="segment record") from None


def _recent(appends: Any) -> tuple[RecentAppend, ...]:
    """A writer's ``writer_appends`` entry as stored: a list of 3-number lists."""
    return tuple((int(first), int(last), int(base))
                 for first, last, base in appends)[-RECENT_APPENDS:]


def load_record(data: bytes, what: str, versions: tuple[int, ...]) -> dict[str, Any]:
    """A stored broker record's fields (``ledger.records``); ``CorruptDataError`` if unreadable."""
    try:
        return records.load_record(data, what, versions)
    except records.RecordFormatError as error:
        raise CorruptDataError(str(error), what=what) from None
