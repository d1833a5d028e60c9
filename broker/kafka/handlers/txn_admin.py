"""DescribeProducers (61) v0, DescribeTransactions (65) v0, ListTransactions (66) v0-v2.

**DescribeProducers** lists a partition's idempotent and transactional
producers from its segment's writer table (``WriterStates``): the writers
``kafka:<producer id>:<epoch>`` with their last sequence (the writer's last
event number) and last append time. Writers of the gRPC API (other ids) are
not Kafka producers and are left out. ``coordinator_epoch`` and
``current_txn_start_offset`` are -1: a segment does not know which
transaction a producer has open (the transaction buffer does, by Folio
transaction, not by producer). A partition another broker owns answers
NOT_LEADER_OR_FOLLOWER.

**DescribeTransactions** and **ListTransactions** answer from the Kafka
transactional ids this broker coordinates (``TxnProducers``) and the Folio
coordinator's state of each one's open transaction, under Kafka's state
names: no transaction yet Empty, OPEN Ongoing, COMMITTING PrepareCommit,
ABORTING PrepareAbort, then CompleteCommit / CompleteAbort (also after the
transaction ended, by the last outcome). The start time is the transaction's
deadline less the producer's timeout; its partitions are the segments the
coordinator registered. An unknown id is TRANSACTIONAL_ID_NOT_FOUND; a broker
without Kafka transactions (a cluster broker) has none to list.

Permissions: DescribeProducers ``consume`` on the topic (Kafka: Read);
the two others ``produce`` on each transactional id (Kafka: Describe, which
Write implies), ListTransactions listing only those.
"""

from __future__ import annotations

import datetime
import re
import time
from typing import Any

from kio.schema.errors import ErrorCode

from broker.api import WriterStates
from broker.errors import BrokerError, NoSuchSegmentError
from broker.kafka.access import TOPIC_CONSUME, TXN_PRODUCE, allowed
from broker.kafka.context import KafkaContext
from broker.kafka.dispatch import Api, Call
from broker.kafka.error_codes import error_code
from broker.kafka.handlers.coordination import ZERO, checked_coordinators
from broker.kafka.locator import TRANSACTION_KEY
from broker.kafka.messages import build, nested, response_class
from broker.kafka.partitions import segment_name
from broker.kafka.txns.producers import TxnProducers
from broker.kafka.txns.records import TxnProducer
from broker.segments.names import parse_segment_name
from broker.txn.coordinator import TxnState
from ledger.errors import LedgerError

__all__ = ["DESCRIBE_PRODUCERS_KEY", "DESCRIBE_TRANSACTIONS_KEY", "LIST_TRANSACTIONS_KEY",
           "ROWS", "kafka_state"]

DESCRIBE_PRODUCERS_KEY = 61
DESCRIBE_TRANSACTIONS_KEY = 65
LIST_TRANSACTIONS_KEY = 66
_WRITER = re.compile(r"kafka:(?P<id>\d+):(?P<epoch>\d+)")
#: No transaction open (Kafka's -1), and the field's default for an unknown id (0).
_NO_TIME = datetime.datetime.fromtimestamp(-1 / 1000, tz=datetime.UTC)
_UNSET_TIME = datetime.datetime.fromtimestamp(0, tz=datetime.UTC)
#: Kafka's transaction states (``TransactionState``) of Folio's.
_STATES = {
    TxnState.OPEN: "Ongoing",
    TxnState.COMMITTING: "PrepareCommit",
    TxnState.ABORTING: "PrepareAbort",
    TxnState.COMMITTED: "CompleteCommit",
    TxnState.ABORTED: "CompleteAbort",
    TxnState.TIMED_OUT: "CompleteAbort",
}
_KAFKA_STATES = frozenset({"Empty", "Ongoing", "PrepareCommit", "PrepareAbort",
                           "CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence"})
_LAST_END = {"commit": "CompleteCommit", "abort": "CompleteAbort", None: "Empty"}


def kafka_state(producers: TxnProducers, producer: TxnProducer) -> str:
    """The Kafka state name of a transactional id now."""
    status = producers.transaction_status(producer)
    if status is None:
        return _LAST_END.get(producer.last_end, "Empty")
    return _STATES.get(status.state, "Ongoing")


# ------------------------------------------------------------------ DescribeProducers


async def handle_describe_producers(context: KafkaContext, call: Call) -> Any:
    """The Kafka producers each partition asked remembers."""
    cls = response_class(DESCRIBE_PRODUCERS_KEY, call.version)
    topic_cls = nested(cls, "TopicResponse")
    topics = []
    for topic in call.request.topics:
        may = allowed(context, call, TOPIC_CONSUME, topic.name)
        partitions = tuple([await _producers_of(context, cls, topic.name, number)
                            if may else _partition(cls, number, TOPIC_CONSUME.refused,
                                                   "consume permission on the topic needed")
                            for number in topic.partition_indexes])
        topics.append(build(topic_cls, name=topic.name, partitions=partitions))
    return build(cls, throttle_time=ZERO, topics=tuple(topics))


def _partition(cls: Any, number: int, code: ErrorCode, message: str | None,
               producers: tuple[Any, ...] = ()) -> Any:
    return build(nested(cls, "PartitionResponse"), partition_index=number, error_code=code,
                 error_message=message, active_producers=producers)


async def _producers_of(context: KafkaContext, cls: Any, topic: str, number: int) -> Any:
    try:
        name = segment_name(topic, number)
        segment = await context.topics.writable_segment(name, "Kafka DescribeProducers")
    except NoSuchSegmentError as error:
        return _partition(cls, number, ErrorCode.unknown_topic_or_partition, str(error))
    except (BrokerError, LedgerError) as error:
        return _partition(cls, number, error_code(error), str(error))
    states = segment.writer_states() if isinstance(segment, WriterStates) else {}
    state_cls = nested(cls, "ProducerState")
    producers = []
    for writer_id, (last_sequence, last_ms) in sorted(states.items()):
        match = _WRITER.fullmatch(writer_id)
        if match is None:
            continue  # a gRPC writer, not a Kafka producer
        producers.append(build(state_cls, producer_id=int(match["id"]),
                               producer_epoch=int(match["epoch"]),
                               last_sequence=last_sequence, last_timestamp=last_ms,
                               coordinator_epoch=-1, current_txn_start_offset=-1))
    return _partition(cls, number, ErrorCode.none, None, tuple(producers))


# ------------------------------------------------------------------ transactions


def _txn_producers(context: KafkaContext) -> TxnProducers | None:
    coordinators = context.coordinators
    return None if coordinators is None else coordinators.txns


async def handle_describe_transactions(context: KafkaContext, call: Call) -> Any:
    """The state of each transactional id asked."""
    cls = response_class(DESCRIBE_TRANSACTIONS_KEY, call.version)
    state_cls = nested(cls, "TransactionState")
    topic_cls = nested(cls, "TopicData")
    states = []
    for transactional_id in call.request.transactional_ids:
        code, coordinators = checked_coordinators(context, call, TXN_PRODUCE, TRANSACTION_KEY,
                                                  transactional_id)
        producers = None if coordinators is None else coordinators.txns
        found = None
        if producers is not None:
            found = next((p for p in producers.described()
                          if p.transactional_id == transactional_id), None)
        if found is None or producers is None:
            if code is ErrorCode.none:
                code = ErrorCode.transactional_id_not_found
            states.append(build(state_cls, error_code=code, transactional_id=transactional_id,
                                transaction_state="", transaction_timeout=ZERO,
                                transaction_start_time=_UNSET_TIME, producer_id=-1,
                                producer_epoch=-1, topics=()))
            continue
        status = producers.transaction_status(found)
        by_topic: dict[str, list[int]] = {}
        start = _NO_TIME
        if status is not None:
            start = datetime.datetime.fromtimestamp(
                (status.deadline_ms - found.timeout_ms) / 1000, tz=datetime.UTC)
            for name in status.segments:
                try:
                    topic, number = parse_segment_name(name)
                except NoSuchSegmentError:
                    continue
                by_topic.setdefault(topic, []).append(number)
        topics = tuple(build(topic_cls, topic=topic, partitions=tuple(sorted(numbers)))
                       for topic, numbers in sorted(by_topic.items()))
        states.append(build(state_cls, error_code=ErrorCode.none,
                            transactional_id=transactional_id,
                            transaction_state=kafka_state(producers, found),
                            transaction_timeout=datetime.timedelta(milliseconds=found.timeout_ms),
                            transaction_start_time=start, producer_id=found.producer_id,
                            producer_epoch=found.epoch, topics=topics))
    return build(cls, throttle_time=ZERO, transaction_states=tuple(states))


async def handle_list_transactions(context: KafkaContext, call: Call) -> Any:
    """The transactional ids this broker coordinates, filtered as asked."""
    cls = response_class(LIST_TRANSACTIONS_KEY, call.version)
    state_cls = nested(cls, "TransactionState")
    request = call.request
    wanted_states = set(request.state_filters)
    unknown = tuple(sorted(wanted_states - _KAFKA_STATES))
    wanted_ids = set(request.producer_id_filters)
    min_duration_ms = getattr(request, "duration_filter", -1)
    pattern_text = getattr(request, "transactional_id_pattern", None)
    try:
        pattern = re.compile(pattern_text) if pattern_text else None
    except re.error:
        return build(cls, throttle_time=ZERO, error_code=ErrorCode.invalid_request,
                     unknown_state_filters=unknown, transaction_states=())
    producers = _txn_producers(context)
    now_ms = int(time.time() * 1000)
    listed = []
    for producer in producers.described() if producers is not None else []:
        if not allowed(context, call, TXN_PRODUCE, producer.transactional_id):
            continue
        state = kafka_state(producers, producer) if producers is not None else "Empty"
        if wanted_states and state not in wanted_states:
            continue
        if wanted_ids and producer.producer_id not in wanted_ids:
            continue
        if pattern is not None and pattern.fullmatch(producer.transactional_id) is None:
            continue
        if min_duration_ms >= 0:
            status = producers.transaction_status(producer) if producers is not None else None
            if status is None or now_ms - (status.deadline_ms - producer.timeout_ms) \
                    < min_duration_ms:
                continue
        listed.append(build(state_cls, transactional_id=producer.transactional_id,
                            producer_id=producer.producer_id, transaction_state=state))
    return build(cls, throttle_time=ZERO, error_code=ErrorCode.none,
                 unknown_state_filters=unknown, transaction_states=tuple(listed))


ROWS = (
    Api(DESCRIBE_PRODUCERS_KEY, "DescribeProducers", 0, 0, handle_describe_producers),
    Api(DESCRIBE_TRANSACTIONS_KEY, "DescribeTransactions", 0, 0, handle_describe_transactions),
    Api(LIST_TRANSACTIONS_KEY, "ListTransactions", 0, 2, handle_list_transactions),
)
