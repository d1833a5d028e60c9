"""Kafka's topic auto-creation: ``auto.create.topics.enable`` and ``num.partitions``.

A Metadata request that names a missing topic and allows it
(``allow_auto_topic_creation``, v4+; v0-v3 always, as Kafka reads them)
creates the topic when the broker's ``kafka_auto_create_topics`` is on (the
default, as in Kafka): ``kafka_num_partitions`` segments (Kafka's
``num.partitions``, default 1) and the broker's default topic config. The
caller needs the permission to administer the topic (``TOPIC_ADMIN``,
Kafka's CREATE): without it the topic is TOPIC_AUTHORIZATION_FAILED and
nothing is made. A name Kafka refuses is INVALID_TOPIC_EXCEPTION (checked
before any lookup; without creation it is UNKNOWN_TOPIC_OR_PARTITION, as any
missing topic), a system topic's stays UNKNOWN_TOPIC_OR_PARTITION. With
the setting off, a missing topic is UNKNOWN_TOPIC_OR_PARTITION at once.

Produce never creates, as in Kafka: a producer learns a topic's partitions
from Metadata first (which creates it), and a Produce to a missing topic is
UNKNOWN_TOPIC_OR_PARTITION, after which the client asks Metadata again.

The outcomes of one creation, and what is done after each:

- made: the topic is read back and answered with its partitions;
- ``TopicExistsError``: another connection or broker made it first (or is
  making it right now): success too, the topic is read back; if its record
  is not there yet (the other creator is between its segment records and its
  topic record), the topic is answered LEADER_NOT_AVAILABLE, as Kafka
  answers a topic being created, and the client asks again;
- unknown (``MetadataUnavailableError`` or another retriable ``LedgerError``:
  the topic may have been made): raised to the Metadata handler, which reads
  again (``broker.kafka.handlers.metadata.read_again``): the topic is looked
  up first, and created only if it is still missing, where an existing topic
  is success. Creating again is therefore never what is only safe after a
  failure. ``TopicManager.create_topic`` keeps two concurrent creators of one
  name apart (``broker.topics.catalog``: a segment record of a concurrent create
  is overwritten only while no topic record exists, at the version read).
"""

from __future__ import annotations

import logging

from broker.api import SegmentRange
from broker.errors import TopicExistsError, TopicNameError, TopicNotFoundError
from broker.kafka.context import KafkaContext
from broker.kafka.partitions import partition_segments
from broker.segments.names import check_topic_name, is_system_topic

__all__ = ["CreateDeniedError", "TopicBeingCreatedError", "segments_or_create"]

log = logging.getLogger(__name__)


class TopicBeingCreatedError(Exception):
    """Created by someone else whose record is not there yet: LEADER_NOT_AVAILABLE.

    Not a ``BrokerError``: only Metadata's answer (handlers/metadata.py) uses
    it and the next one; it never crosses the gRPC or Kafka wire as an error.
    """


class CreateDeniedError(Exception):
    """Missing, and the caller may not create it: TOPIC_AUTHORIZATION_FAILED (as above)."""


async def segments_or_create(context: KafkaContext, name: str, *, create: bool,
                             permitted: bool = True) -> list[SegmentRange]:
    """The partitions of ``name`` (``partition_segments``), made first if missing and ``create``.

    ``create``: the request allows auto-creation (the broker's setting is
    checked here); ``permitted``: the caller may create the topic. Raises
    ``TopicNotFoundError`` (not created), ``CreateDeniedError``,
    ``TopicBeingCreatedError``, ``TopicNameError`` (a name Kafka refuses), a
    retriable ``LedgerError`` (unknown outcome: look up again).
    """
    creating = create and context.auto_create_topics
    try:
        # Before any lookup: a name no topic can have ("a/../b") is never a
        # metadata path (ZooKeeper refuses relative ones).
        check_topic_name(name, internal=True)
    except TopicNameError:
        if creating:
            raise  # INVALID_TOPIC_EXCEPTION, as Kafka's creation answers
        raise TopicNotFoundError(name) from None
    try:
        return await partition_segments(context.topics, name)
    except TopicNotFoundError:
        if not creating or is_system_topic(name):
            raise
        if not permitted:
            raise CreateDeniedError(name) from None
    try:
        await context.topics.create_topic(name, context.num_partitions,
                                          context.topics.default_config())
        log.info("kafka: auto-created topic %s with %d segments", name, context.num_partitions)
    except TopicExistsError:
        pass  # made by another connection or broker: as good as ours
    try:
        return await partition_segments(context.topics, name)
    except TopicNotFoundError:
        raise TopicBeingCreatedError(name) from None
