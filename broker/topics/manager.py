"""TopicManager: topics, their records and their loaded segments (``broker.api.Topics``).

A topic is a record at ``/folio/topics/<name>`` listing its segments; each
segment has its own record at ``/folio/segments/<topic>/<number>``
(``broker.segments.records``). Creation writes the segment records first and
the topic record last: the topic record is the commit point, so a crash in
between leaves only segment records that a later create of the same name
overwrites. Deletion goes the other way (segments, their ledgers, then the
topic record), so a crash in between leaves a topic that deleting again
finishes.

Segments are loaded (recovered, ``LedgerSegment.load``) on first use, one load
at a time per segment, and cached. A background task rolls ledgers over by age,
applies retention and forgets idle writers of the loaded segments every
``retention_interval_s``.

``TopicManager`` is composed of parts, one job each, on the fields of
``_core.TopicsCore``: ``_segments`` (the cache of loaded segments), ``_crud``
(create, get, list, reconfigure, delete), ``_scale`` (scaling, sealing,
successors) and ``maintenance`` (the background round).
"""

from __future__ import annotations

from broker.topics._crud import MAX_SEGMENT_COUNT, TopicCrud
from broker.topics.maintenance import TopicMaintenance

__all__ = ["MAX_SEGMENT_COUNT", "TopicManager"]


class TopicManager(TopicMaintenance, TopicCrud):
    """Topics and their segments on this broker (standalone: all of them).

    Args:
        ledgers: the ledger service.
        store: where topic and segment records live.
        defaults: the configuration of fields a topic's creator leaves unset.
        retention_interval_s: how often the background task applies retention,
            age rollover and writer expiry.
        clock: seconds since the epoch (injectable for tests).
        writer_expiry_ms: a segment forgets writers (their last event number)
            idle longer than this; default 7 days.
        txn_snapshots: when the segments' transaction buffers snapshot themselves.
        txn_store_factory: makes the transaction buffers' snapshot store on
            this manager, once, when the first user segment loads (the store is
            a system topic on this very manager, so the caller passes how to
            make it: ``broker.system.snapshot_store.snapshot_store``; this
            package never imports the system topics above it).
    """
