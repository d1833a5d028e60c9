"""Creating, reading, reconfiguring and deleting topics.

``TopicCrud`` is a part of ``TopicManager``. Its collaborators, passed in:
the metadata store, the ``TopicCatalog`` (topic locks, record reads and
compare-and-sets, descriptions), the table of loaded segments (closed and
deleted with their topic, reconfigured with it), the clock (a topic's
creation time) and the owner's ``check_open``.

Creation writes the segment records first and the topic record last: the
topic record is the commit point, so a crash in between leaves only segment
records that a later create of the same name overwrites. Deletion goes the
other way (segments, their ledgers, then the topic record), so a crash in
between leaves a topic that deleting again finishes.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping
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
    segments_path,
    topic_path,
)
from broker.topics.catalog import CAS_ATTEMPTS, TopicCatalog
from broker.topics.internal import refuse_internal_topic
from broker.topics.loaded import LoadedSegments
from broker.topics.records import TopicRecord, TopicSegment
from ledger.api import MetadataStore
from ledger.errors import (
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


class TopicCrud:
    """Topic CRUD (a part of ``TopicManager``).

    Args:
        store: where topic and segment records live.
        catalog: the topic locks, record reads and descriptions.
        loaded: the table of loaded segments.
        clock: seconds since the epoch (a topic's ``created_ms``).
        check_open: raises ``BrokerShuttingDownError`` once the owner closes.
    """

    def __init__(self, store: MetadataStore, catalog: TopicCatalog, loaded: LoadedSegments, *,
                 clock: Callable[[], float], check_open: Callable[[], None]) -> None:
        self._store = store
        self._catalog = catalog
        self._loaded = loaded
        self._clock = clock
        self._check_open = check_open
        #: Called with a topic's name once it is deleted (``add_deletion_hook``).
        self._deletion_hooks: list[Callable[[str], Awaitable[object]]] = []

    def add_deletion_hook(self, hook: Callable[[str], Awaitable[object]]) -> None:
        """Call ``hook(name)`` after each deletion of a topic by this broker.

        Its failure is logged, never the deletion's: whoever needs a deletion
        missed here (a hook failed, a crash between, another broker deleted
        it) looks again by itself (e.g. the Kafka offsets' sweep).
        """
        self._deletion_hooks.append(hook)

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
        async with self._catalog.lock(name):
            if await self._store.exists(topic_path(name)):
                raise TopicExistsError(name)
            segments = tuple(
                TopicSegment(i, i / segment_count,
                             1.0 if i + 1 == segment_count else (i + 1) / segment_count)
                for i in range(segment_count)
            )
            for segment in segments:
                await self._catalog.create_segment_record(name, segment.number,
                                                          new_topic=True)
            record = TopicRecord(name, config, segments, segment_count,
                                 int(self._clock() * 1000), topic_id=str(uuid.uuid4()))
            try:
                await self._store.create(topic_path(name), record.to_bytes(), make_parents=True)
            except NodeExistsError:
                raise TopicExistsError(name) from None
            except MetadataUnavailableError:
                # Maybe created: our record (its creation time in it) means it was.
                if await landed(self._store, topic_path(name), record.to_bytes()) is None:
                    raise
        log.info("created topic %s with %d segments", name, segment_count)
        return await self._catalog.info(record)

    async def get_topic(self, name: str) -> TopicInfo:
        """The topic with its active segments and their offsets. ``TopicNotFoundError``."""
        self._check_open()
        record, _ = await self._catalog.read(name)
        return await self._catalog.info(record)

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
        async with self._catalog.lock(name):
            record, _ = await self._catalog.read(name)
            for entry in record.segments:
                await self._loaded.delete_segment(name, entry.number)
            with contextlib.suppress(NoNodeError, NotEmptyError):
                await self._store.delete(segments_path(name))
            try:
                await self._store.delete(topic_path(name))
            except NoNodeError:
                raise TopicNotFoundError(name) from None
        log.info("deleted topic %s", name)
        for hook in list(self._deletion_hooks):
            try:
                await hook(name)
            except Exception as error:  # its own job: the topic is deleted all the same
                log.warning("topic %s deleted, but its deletion hook %r failed: %s", name,
                            hook, error)

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
        async with self._catalog.lock(name):
            for _ in range(CAS_ATTEMPTS):
                record, version = await self._catalog.read(name)
                try:
                    config = replace(record.config, **changes)
                except (TypeError, ValueError) as error:
                    raise InvalidArgumentError(str(error)) from None
                updated = record.with_config(config)
                # Maybe applied (unknown outcome): read back; not ours (not
                # applied, or changed since), the loop reads again and retries.
                if await self._catalog.replace(name, updated, version,
                                               change="while updating its config"):
                    break
            else:
                raise BrokerError(f"topic {name!r} kept changing; config not updated")
        for entry in updated.segments:
            segment = self._loaded.get(make_segment_name(name, entry.number))
            if segment is not None:
                segment.set_config(config)
        return await self._catalog.info(updated)
