"""Creating, reading, reconfiguring and deleting topics.

Creation writes the segment records first and the topic record last: the
topic record is the commit point, so a crash in between leaves only segment
records that a later create of the same name overwrites. Deletion goes the
other way (segments, their ledgers, then the topic record), so a crash in
between leaves a topic that deleting again finishes.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from dataclasses import fields, replace

from broker.api import TopicConfig, TopicInfo
from broker.errors import (
    BrokerError,
    InvalidArgumentError,
    TopicExistsError,
    TopicNotFoundError,
)
from broker.segments.names import (
    TOPICS_ROOT,
    check_topic_name,
    is_system_topic,
    make_segment_name,
    segment_path,
    segments_path,
    topic_path,
)
from broker.segments.records import SegmentRecord
from broker.topics._core import CAS_ATTEMPTS, TopicsCore
from broker.topics.internal import refuse_internal_topic
from broker.topics.records import TopicRecord, TopicSegment
from ledger.errors import (
    BadVersionError,
    LedgerError,
    MetadataUnavailableError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
)
from ledger.metadata.read_back import landed

__all__ = ["MAX_SEGMENT_COUNT", "TopicCrud"]

log = logging.getLogger(__name__)

MAX_SEGMENT_COUNT = 1024
_CONFIG_FIELDS = frozenset(f.name for f in fields(TopicConfig))


class TopicCrud(TopicsCore):
    """Topic CRUD (a part of ``TopicManager``)."""

    async def create_topic(
        self, name: str, segment_count: int, config: TopicConfig, *, internal: bool = False,
    ) -> TopicInfo:
        """Create a topic of ``segment_count`` equal key ranges.

        ``internal`` allows a system topic name (``is_system_topic``). Raises
        ``TopicNameError``, ``InternalTopicError`` (a ``_`` name without
        ``internal``), ``InvalidArgumentError`` (count outside [1, 1024], a bad
        config value), ``TopicExistsError``.
        """
        self._check_open()
        check_topic_name(name, internal=True)
        if not internal:
            refuse_internal_topic(name, "CreateTopic")
        if not 1 <= segment_count <= MAX_SEGMENT_COUNT:
            raise InvalidArgumentError(
                f"segment_count must be in [1, {MAX_SEGMENT_COUNT}], got {segment_count}")
        try:
            config = replace(config)  # checks it again: callers may have built it loosely
        except (TypeError, ValueError) as error:
            raise InvalidArgumentError(str(error)) from None
        async with self._lock(f"topic:{name}"):
            if await self._store.exists(topic_path(name)):
                raise TopicExistsError(name)
            segments = tuple(
                TopicSegment(i, i / segment_count,
                             1.0 if i + 1 == segment_count else (i + 1) / segment_count)
                for i in range(segment_count)
            )
            for segment in segments:
                await self._create_segment_record(name, segment.number, new_topic=True)
            record = TopicRecord(name, config, segments, segment_count, self._now_ms())
            try:
                await self._store.create(topic_path(name), record.to_bytes(), make_parents=True)
            except NodeExistsError:
                raise TopicExistsError(name) from None
            except MetadataUnavailableError:
                # Maybe created: our record (its creation time in it) means it was.
                if await landed(self._store, topic_path(name), record.to_bytes()) is None:
                    raise
        log.info("created topic %s with %d segments", name, segment_count)
        return await self._topic_info(record)

    async def get_topic(self, name: str) -> TopicInfo:
        """The topic with its active segments and their offsets. ``TopicNotFoundError``."""
        self._check_open()
        record, _ = await self._read_topic(name)
        return await self._topic_info(record)

    async def list_topics(self, *, include_internal: bool = False) -> list[TopicInfo]:
        """Every user topic by name; system topics too with ``include_internal``."""
        self._check_open()
        try:
            names = await self._store.children(TOPICS_ROOT)
        except NoNodeError:
            return []
        topics = []
        for name in sorted(names):
            if is_system_topic(name) and not include_internal:
                continue
            with contextlib.suppress(TopicNotFoundError):  # deleted meanwhile
                topics.append(await self.get_topic(name))
        return topics

    async def delete_topic(self, name: str, *, internal: bool = False) -> None:
        """Delete the topic, its segments and their ledgers. ``TopicNotFoundError``.

        Loaded segments are closed first; their handles then fail every call
        with ``NoSuchSegmentError``. ``InternalTopicError`` for a system topic
        unless ``internal`` (the broker's own components only).
        """
        self._check_open()
        if not internal:
            refuse_internal_topic(name, "DeleteTopic")
        async with self._lock(f"topic:{name}"):
            record, _ = await self._read_topic(name)
            for entry in record.segments:
                segment_name = make_segment_name(name, entry.number)
                async with self._loaded.lock(segment_name):
                    segment = self._loaded.pop(segment_name)
                    if segment is not None:
                        await segment.delete()
                    else:
                        await self._delete_unloaded_segment(name, entry.number)
            with contextlib.suppress(NoNodeError, NotEmptyError):
                await self._store.delete(segments_path(name))
            try:
                await self._store.delete(topic_path(name))
            except NoNodeError:
                raise TopicNotFoundError(name) from None
        log.info("deleted topic %s", name)

    async def _delete_unloaded_segment(self, topic: str, number: int) -> None:
        path = segment_path(topic, number)
        try:
            node = await self._store.get(path)
        except NoNodeError:
            return
        ledgers = SegmentRecord.from_bytes(node.data).ledgers
        if self._loaded.reload_fenced and ledgers:
            # In a cluster another broker may have the segment loaded: fence its
            # ledger first, so its appends fail (and it finds the segment gone)
            # rather than land in a ledger about to be deleted.
            try:
                await self._ledgers.open(ledgers[-1].ledger_id, recovery=True)
            except LedgerError as error:
                log.info("topic %s: ledger %d not fenced before deletion: %s", topic,
                         ledgers[-1].ledger_id, error)
        for ledger in ledgers:
            try:
                await self._ledgers.delete(ledger.ledger_id)
            except LedgerError as error:
                log.warning("topic %s: ledger %d left behind: %s", topic, ledger.ledger_id, error)
        with contextlib.suppress(NoNodeError):
            await self._store.delete(path)

    async def update_topic_config(self, name: str, changes: Mapping[str, int], *,
                                  internal: bool = False) -> TopicInfo:
        """Set the named ``TopicConfig`` fields; the others keep their values.

        Raises ``TopicNotFoundError``, ``InvalidArgumentError`` (unknown field,
        bad value), ``InternalTopicError`` (a system topic, unless ``internal``:
        only the broker passes it).
        """
        self._check_open()
        if not internal:
            refuse_internal_topic(name, "UpdateTopicConfig")
        unknown = sorted(set(changes) - _CONFIG_FIELDS)
        if unknown:
            raise InvalidArgumentError(f"unknown topic config fields {unknown}; known: "
                                       f"{sorted(_CONFIG_FIELDS)}")
        async with self._lock(f"topic:{name}"):
            for _ in range(CAS_ATTEMPTS):
                record, version = await self._read_topic(name)
                try:
                    config = replace(record.config, **changes)
                except (TypeError, ValueError) as error:
                    raise InvalidArgumentError(str(error)) from None
                updated = record.with_config(config)
                try:
                    await self._store.set(topic_path(name), updated.to_bytes(), version)
                except BadVersionError:
                    log.info("topic %s changed while updating its config; retrying", name)
                    continue
                except NoNodeError:
                    raise TopicNotFoundError(name) from None
                except MetadataUnavailableError:
                    # Maybe applied: read back; not ours (not applied, or changed
                    # since), the loop reads the record again and retries.
                    if await landed(self._store, topic_path(name), updated.to_bytes()) is None:
                        continue
                break
            else:
                raise BrokerError(f"topic {name!r} kept changing; config not updated")
        for entry in updated.segments:
            segment = self._loaded.get(make_segment_name(name, entry.number))
            if segment is not None:
                segment.set_config(config)
        return await self._topic_info(updated)
