"""AddPartitionsToTxn (24) v0-v5, AddOffsetsToTxn (25) v0-v4, EndTxn (26) v0-v5,
TxnOffsetCommit (28) v0-v5, and the hooks of Produce and InitProducerId.

Thin: the rules are ``broker.kafka.txns.producers``'. ``install`` sets
``KafkaContext.transactional_producer_id`` (InitProducerId with a
transactional id) and ``KafkaContext.transactional_write`` (a transactional
batch's open Folio transaction: Produce appends it as an entry of it, by the
same code as any batch, with the producer's writer id and sequence, so
retries are dropped and gaps refused as for idempotent producers), and
``KafkaContext.transactional_check`` (KIP-890: a transactional batch's
partition must have been added to the transaction; Produce v12+ adds it).

KIP-890 (``broker.kafka.txns.versions``): AddPartitionsToTxn v4+ is the form
brokers send (many transactions, ``verify_only``; the cluster permission);
EndTxn v5 bumps the epoch and answers the new producer id and epoch;
TxnOffsetCommit v5+ begins the transaction as AddOffsetsToTxn would. On a
multi-broker cluster a partition's owner asks the transaction coordinator to
check (or add) the batch's partition (``FindKafkaTxn`` with the partition,
``broker.kafka.txns.cluster``).
"""

from __future__ import annotations

import logging
from typing import Any

from kio.schema.errors import ErrorCode

from broker.errors import BrokerError
from broker.kafka.access import CLUSTER, GROUP_CONSUME, TOPIC_PRODUCE, TXN_PRODUCE, allowed
from broker.kafka.batches import BatchHeader
from broker.kafka.consumer_groups.coordinator import OffsetCommitItem
from broker.kafka.consumer_groups.offsets import TopicPartition
from broker.kafka.context import KafkaContext, TxnWrite
from broker.kafka.dispatch import Api, Call
from broker.kafka.error_codes import error_code
from broker.kafka.handlers.coordination import ZERO, checked_coordinators, coordinators_for
from broker.kafka.handlers.group_offsets import commit_items, split_refused, topic_answers
from broker.kafka.locator import GROUP_KEY, TRANSACTION_KEY
from broker.kafka.messages import build, nested, response_class
from broker.kafka.partitions import partition_segments
from broker.kafka.txns.answers import group_offset_errors
from broker.kafka.txns.implicit import check_partition
from broker.kafka.txns.producers import TxnProducers
from broker.kafka.txns.versions import adds_by_producing, produce_error
from broker.segments.names import is_system_topic
from ledger.errors import LedgerError

__all__ = ["ROWS", "install"]

log = logging.getLogger(__name__)

ADD_PARTITIONS_TO_TXN_KEY = 24
ADD_OFFSETS_TO_TXN_KEY = 25
END_TXN_KEY = 26
TXN_OFFSET_COMMIT_KEY = 28


def _producers(context: KafkaContext, call: Call | None, transactional_id: str | None,
               ) -> tuple[ErrorCode, TxnProducers | None]:
    """The transactional producers, if this broker coordinates the id and the role may use it.

    ``call`` None: checked already (Produce's transactional batches).
    """
    if call is None:
        code, coordinators = coordinators_for(context, TRANSACTION_KEY, transactional_id)
    else:
        code, coordinators = checked_coordinators(context, call, TXN_PRODUCE, TRANSACTION_KEY,
                                                  transactional_id)
    if coordinators is None:
        return code, None
    if coordinators.txns is None:
        return ErrorCode.coordinator_not_available, None
    return ErrorCode.none, coordinators.txns


async def handle_add_partitions(context: KafkaContext, call: Call) -> Any:
    """Check the partitions and open the producer's Folio transaction (v4+: brokers' form)."""
    cls = response_class(ADD_PARTITIONS_TO_TXN_KEY, call.version)
    request = call.request
    if call.version >= 4:
        return await _brokers_add_partitions(context, call, cls)
    transactional_id = request.v3_and_below_transactional_id
    asked = [(topic.name, partition) for topic in request.v3_and_below_topics
             for partition in topic.partitions]
    code, producers = _producers(context, call, transactional_id)
    errors = dict.fromkeys(asked, code)
    if producers is not None:
        errors = await _add(context, call, producers, transactional_id,
                            request.v3_and_below_producer_id,
                            request.v3_and_below_producer_epoch, asked)
    return build(cls, throttle_time=ZERO,
                 results_by_topic_v3_and_below=_topic_results(cls, errors))


async def _add(context: KafkaContext, call: Call, producers: TxnProducers,
               transactional_id: str | None, producer_id: int, epoch: int,
               asked: list[tuple[str, int]]) -> dict[tuple[str, int], ErrorCode]:
    errors = {tp: await _partition_error(context, call, *tp) for tp in asked}
    if any(value is not ErrorCode.none for value in errors.values()):
        # Kafka adds all or none: the good ones were not attempted.
        return {tp: ErrorCode.operation_not_attempted if value is ErrorCode.none
                else value for tp, value in errors.items()}
    code = await producers.begin(transactional_id, producer_id, epoch, partitions=asked)
    return dict.fromkeys(asked, code)


async def _brokers_add_partitions(context: KafkaContext, call: Call, cls: Any) -> Any:
    """AddPartitionsToTxn v4+, as a Kafka broker sends it: adds or checks (``verify_only``).

    Kafka asks the cluster permission (ClusterAction) of the caller: here
    the cluster's, a super-user's (``broker.kafka.access``).
    """
    if not allowed(context, call, CLUSTER, ""):
        return build(cls, throttle_time=ZERO, error_code=CLUSTER.refused,
                     results_by_transaction=())
    results = []
    for txn in call.request.transactions:
        asked = [(topic.name, partition) for topic in txn.topics
                 for partition in topic.partitions]
        code, producers = _producers(context, None, txn.transactional_id)
        errors = dict.fromkeys(asked, code)
        if producers is not None and txn.verify_only:
            errors = producers.verify(txn.transactional_id, txn.producer_id,
                                      txn.producer_epoch, asked)
        elif producers is not None:
            errors = await _add(context, call, producers, txn.transactional_id,
                                txn.producer_id, txn.producer_epoch, asked)
        results.append(build(nested(cls, "AddPartitionsToTxnResult"),
                             transactional_id=txn.transactional_id,
                             topic_results=_topic_results(cls, errors)))
    return build(cls, throttle_time=ZERO, error_code=ErrorCode.none,
                 results_by_transaction=tuple(results))


def _topic_results(cls: Any, errors: dict[tuple[str, int], ErrorCode]) -> tuple[Any, ...]:
    topic_cls = nested(cls, "AddPartitionsToTxnTopicResult")
    partition_cls = nested(cls, "AddPartitionsToTxnPartitionResult")
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), value in errors.items():
        by_topic.setdefault(topic, []).append(
            build(partition_cls, partition_index=partition, partition_error_code=value))
    return tuple(build(topic_cls, name=name, results_by_partition=tuple(parts))
                 for name, parts in by_topic.items())


async def _partition_error(context: KafkaContext, call: Call, topic: str,
                           partition: int) -> ErrorCode:
    if not allowed(context, call, TOPIC_PRODUCE, topic):
        return TOPIC_PRODUCE.refused
    if is_system_topic(topic):  # not served through Kafka (docs/kafka.md)
        return ErrorCode.unknown_topic_or_partition
    try:
        numbers = {segment.number for segment in await partition_segments(context.topics,
                                                                         topic)}
    except (BrokerError, LedgerError) as error:
        return error_code(error)
    return ErrorCode.none if partition in numbers else ErrorCode.unknown_topic_or_partition


async def handle_add_offsets(context: KafkaContext, call: Call) -> Any:
    """Open the producer's Folio transaction for offsets of ``group_id``."""
    cls = response_class(ADD_OFFSETS_TO_TXN_KEY, call.version)
    request = call.request
    code, producers = _producers(context, call, request.transactional_id)
    if producers is not None and not allowed(context, call, GROUP_CONSUME, request.group_id):
        code, producers = GROUP_CONSUME.refused, None
    if producers is not None:
        if not request.group_id:
            code = ErrorCode.invalid_group_id
        else:
            code = await producers.begin(request.transactional_id, request.producer_id,
                                         request.producer_epoch, request.group_id)
    return build(cls, throttle_time=ZERO, error_code=code)


async def handle_end_txn(context: KafkaContext, call: Call) -> Any:
    """Commit or abort the producer's transaction (v5: and bump its epoch, answered)."""
    cls = response_class(END_TXN_KEY, call.version)
    request = call.request
    code, producers = _producers(context, call, request.transactional_id)
    producer_id, epoch = -1, -1
    if producers is not None:
        code = await producers.end(request.transactional_id, request.producer_id,
                                   request.producer_epoch, request.committed,
                                   bump_epoch=call.version >= 5)
        producer = producers.producer(request.transactional_id)
        if code is ErrorCode.none and producer is not None:
            producer_id, epoch = producer.producer_id, producer.epoch
    return build(cls, throttle_time=ZERO, error_code=code, producer_id=producer_id,
                 producer_epoch=epoch)


async def handle_txn_offset_commit(context: KafkaContext, call: Call) -> Any:
    """Keep the offsets with the producer's transaction (written when it commits)."""
    cls = response_class(TXN_OFFSET_COMMIT_KEY, call.version)
    request = call.request
    every = commit_items(request)
    if context.coordinators is not None and context.coordinators.cluster_txns is not None:
        errors = await _cluster_txn_offsets(context, call, every)
        return build(cls, throttle_time=ZERO, topics=topic_answers(
            cls, "TxnOffsetCommitResponseTopic", "TxnOffsetCommitResponsePartition", errors))
    code, producers = _producers(context, None, request.transactional_id)
    if not allowed(context, call, GROUP_CONSUME, request.group_id):
        code, producers = GROUP_CONSUME.refused, None
    if producers is None:  # the group's (or coordinator's) error on every partition
        errors = {(item.topic, item.partition): code for item in every}
    else:
        items, errors = split_refused(context, call, every)
        generation = getattr(request, "generation_id", -1)
        member_id = getattr(request, "member_id", "")
        consumers = None if context.coordinators is None else context.coordinators.consumers
        if items and consumers is not None and consumers.group(request.group_id) is not None \
                and (generation >= 0 or member_id):
            # A KIP-848 member: its member epoch is checked here, not as a generation.
            code = consumers.commit_error(request.group_id, member_id, generation,
                                          call.version, transactional=True)
            if code is not ErrorCode.none:
                errors.update({(item.topic, item.partition): code for item in items})
                items = []
            generation, member_id = -1, ""
        if items and call.version >= 5 and adds_by_producing(producers.producer(
                request.transactional_id)):  # KIP-890: begins the transaction if none is open
            code = await producers.begin(request.transactional_id, request.producer_id,
                                         request.producer_epoch, request.group_id)
            if code is not ErrorCode.none:
                errors.update({(item.topic, item.partition): code for item in items})
                items = []
        if items:
            errors.update(await producers.add_offsets(
                request.transactional_id, request.producer_id, request.producer_epoch,
                request.group_id, generation, member_id, items,
                getattr(request, "group_instance_id", None)))
    return build(cls, throttle_time=ZERO, topics=topic_answers(
        cls, "TxnOffsetCommitResponseTopic", "TxnOffsetCommitResponsePartition", errors))


async def _cluster_txn_offsets(context: KafkaContext, call: Call,
                               every: list[OffsetCommitItem],
                               ) -> dict[TopicPartition, ErrorCode]:
    """TxnOffsetCommit at the group's coordinator of a cluster (``broker.kafka.txns.cluster``).

    The client sends it to the group's coordinator (FindCoordinator GROUP), as
    to Kafka: it checks the member and the partitions, then the transaction
    coordinator keeps the offsets with the transaction, wherever it runs
    (v5+: beginning it first if none is open, KIP-890).
    """
    request = call.request
    code, coordinators = checked_coordinators(context, call, GROUP_CONSUME, GROUP_KEY,
                                              request.group_id)
    if coordinators is None or coordinators.cluster_txns is None:
        return {(item.topic, item.partition): code for item in every}
    items, errors = split_refused(context, call, every)
    if items:
        errors.update(await group_offset_errors(
            coordinators.groups, request.group_id, getattr(request, "generation_id", -1),
            getattr(request, "member_id", ""), items,
            getattr(request, "group_instance_id", None)))
        good = [item for item in items
                if errors[(item.topic, item.partition)] is ErrorCode.none]
        if good:
            errors.update(await coordinators.cluster_txns.keep_offsets(
                request.transactional_id, request.producer_id, request.producer_epoch,
                request.group_id, good, begin=call.version >= 5))
    return errors


# ---------------------------------------------------------------- hooks

async def transactional_producer_id(context: KafkaContext, call: Call,
                                    ) -> tuple[ErrorCode, int, int]:
    """InitProducerId with a transactional id: (error, producer id, epoch)."""
    request = call.request
    code, producers = _producers(context, call, request.transactional_id)
    if producers is None:
        return code, -1, -1
    return await producers.init(request.transactional_id,
                                int(request.transaction_timeout.total_seconds() * 1000),
                                getattr(request, "producer_id", -1),
                                getattr(request, "producer_epoch", -1))


async def transactional_write(context: KafkaContext, transactional_id: str | None,
                              segment_name: str, header: BatchHeader) -> tuple[
                                  ErrorCode, str | None, TxnWrite | None]:
    """A transactional batch's place in its producer's open Folio transaction.

    Produce appends it as any batch, inside the returned ``writing`` context
    (``broker.kafka.handlers.produce``): one path for sequences, group commit
    and failed appends, transactional or not. In a cluster the partition's
    owner asks the transaction coordinator wherever it runs
    (``broker.kafka.txns.cluster``).
    """
    if context.coordinators is not None and context.coordinators.cluster_txns is not None:
        return await context.coordinators.cluster_txns.transactional_write(
            context, transactional_id, segment_name, header)
    code, producers = _producers(context, None, transactional_id)
    if producers is None:
        return code, "no transaction coordinator for this transactional id", None
    code, txn_id = producers.append_check(transactional_id, header.producer_id,
                                          header.producer_epoch)
    if code is not ErrorCode.none or txn_id is None:
        return code, f"transactional batch refused: {code.name}", None
    return ErrorCode.none, None, (txn_id, producers.coordinator.writing(txn_id, segment_name))


async def transactional_check(context: KafkaContext, transactional_id: str | None,
                              topic: str, partition: int, header: BatchHeader,
                              version: int) -> tuple[ErrorCode, str | None]:
    """KIP-890: a transactional batch's partition is in the transaction (Produce v12+: added).

    Before v12 a partition the producer did not add (AddPartitionsToTxn) is
    refused (part 1); from v12 the batch adds it, beginning the transaction
    if none is open (part 2, transaction version 2), unless the last
    transaction ended without a bump (``versions.adds_by_producing``). Answered as Kafka's
    partition leader answers (``broker.kafka.txns.versions.produce_error``).
    On a multi-broker cluster the partition's owner asks the transaction
    coordinator wherever it runs (``broker.kafka.txns.cluster``).
    """
    add = version >= 12
    if context.coordinators is not None and context.coordinators.cluster_txns is not None:
        code = await context.coordinators.cluster_txns.check_partition(
            transactional_id or "", header.producer_id, header.producer_epoch,
            (topic, partition), add)
    else:
        code, producers = _producers(context, None, transactional_id)
        if producers is None:
            return code, "no transaction coordinator for this transactional id"
        code = await check_partition(producers, transactional_id, header.producer_id,
                                     header.producer_epoch, (topic, partition), add)
    if code is ErrorCode.none:
        return code, None
    return produce_error(code, version), (
        f"transactional batch to {topic}/{partition} refused: {code.name}")


def install(context: KafkaContext) -> None:
    """Serve transactional producers on ``context`` (its coordinators are set)."""
    context.transactional_producer_id = transactional_producer_id
    context.transactional_write = transactional_write
    context.transactional_check = transactional_check


ROWS = (
    Api(ADD_PARTITIONS_TO_TXN_KEY, "AddPartitionsToTxn", 0, 5, handle_add_partitions),
    Api(ADD_OFFSETS_TO_TXN_KEY, "AddOffsetsToTxn", 0, 4, handle_add_offsets),
    Api(END_TXN_KEY, "EndTxn", 0, 5, handle_end_txn),
    Api(TXN_OFFSET_COMMIT_KEY, "TxnOffsetCommit", 0, 5, handle_txn_offset_commit),
)
