"""Reader-group backlog: events between each group's reader offsets and its segments' tails.

``GroupBacklog.update`` runs on the broker's maintenance round (a hook of the
``TopicManager``, every ``retention_interval_s``), never on a read or append:
it reads each group's state and its topics' segment lists (offsets from the
loaded segment or the segment record; nothing is loaded) and sets
``folio_reader_group_backlog_events`` per group. A segment the group holds
counts ``end_offset - offset`` (the offset being the later of the recorded one
and the one its reader last reported in a heartbeat, ``broker.groups.liveness``);
a future segment (waiting for predecessors) counts from its start offset; a
deleted group's series is dropped. The same round sets
``folio_group_lag{kind="reader",group,topic,partition}`` per segment
(``partition``: the segment's number; ``lags_of``), beside the Kafka groups'.
"""

from __future__ import annotations

import logging

from broker.api import Topics
from broker.errors import BrokerError, ReaderGroupNotFoundError
from broker.groups.liveness import GroupLiveness
from broker.groups.store import ReaderGroupStore
from broker.metrics import forget_reader_group, set_group_lags, set_reader_group_backlog
from folio.api.v1 import groups_pb2
from ledger.errors import LedgerError

__all__ = ["GroupBacklog", "backlog_of", "lags_of"]

log = logging.getLogger(__name__)


def lags_of(state: groups_pb2.ReaderGroupState, ends: dict[str, int],
            reported: dict[str, int] | None = None) -> dict[str, int]:
    """Events the group has yet to read per segment, given each end offset (unknown: 0).

    ``reported``: offsets its readers last reported, used where beyond the recorded ones.
    """
    reported = reported or {}
    offsets = [(held.segment, max(held.offset, reported.get(held.segment, held.offset)))
               for reader in state.readers for held in reader.segments]
    offsets += [(free.segment, free.offset) for free in state.unassigned]
    offsets += [(future.segment, future.start_offset) for future in state.future]
    return {segment: max(0, ends.get(segment, offset) - offset) for segment, offset in offsets}


def backlog_of(state: groups_pb2.ReaderGroupState, ends: dict[str, int],
               reported: dict[str, int] | None = None) -> int:
    """Events the group has yet to read, given each segment's end offset (unknown: 0)."""
    return sum(lags_of(state, ends, reported).values())


class GroupBacklog:
    """Keeps the backlog gauge of every reader group current, one maintenance round at a time."""

    def __init__(self, groups: ReaderGroupStore, topics: Topics,
                 liveness: GroupLiveness | None = None) -> None:
        self._groups = groups
        self._topics = topics
        self._liveness = liveness
        self._reported: set[str] = set()

    async def update(self) -> None:
        """Set every group's backlog now; forget groups deleted since the last round."""
        names = await self._groups.names()
        ends: dict[str, int] = {}
        listed: set[str] = set()
        lags: dict[tuple[str, str, str], int] = {}
        for name in names:
            try:
                record = await self._groups.get(name)
            except ReaderGroupNotFoundError:
                continue  # deleted meanwhile
            for topic in record.state.topics:
                if topic in listed:
                    continue
                listed.add(topic)
                try:
                    ranges = await self._topics.list_segments(topic, include_sealed=True)
                except (BrokerError, LedgerError) as error:
                    log.debug("backlog of group %s: topic %s not listed: %s", name, topic, error)
                    continue
                ends.update((segment.name, segment.end_offset) for segment in ranges)
            reported = (None if self._liveness is None
                        else self._liveness.reported(name, record.state))
            by_segment = lags_of(record.state, ends, reported)
            set_reader_group_backlog(name, sum(by_segment.values()))
            for segment, lag in by_segment.items():
                topic, _, number = segment.rpartition("/")
                lags[(name, topic, number)] = lag
        for gone in self._reported - set(names):
            forget_reader_group(gone)
        self._reported = set(names)
        set_group_lags("reader", lags)
