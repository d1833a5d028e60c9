"""Produce (key 0), v3-v13: one record batch per partition, appended as one block.

v13 names topics by id (KIP-516): each id is mapped to its topic's name
(``broker.kafka.topic_ids``), an id no topic has answered UNKNOWN_TOPIC_ID
for each of its partitions, and the answer names topics by id. v10+
answers name the current leader of a partition refused NOT_LEADER_OR_FOLLOWER,
and its address, when another broker of the cluster owns it (KIP-951,
``broker.kafka.leader_hints``). KIP-890: before v12 a
transactional batch to a partition not added to the transaction is refused
(v11: TRANSACTION_ABORTABLE, else INVALID_TXN_STATE); from v12 the batch
adds it (``KafkaContext.transactional_check``).

Per partition: the batch header is checked (``broker.kafka.batches``: magic
2, CRC32C, record count), the batch is wrapped as a format-2 block
(``broker.kafka.blocks``) and appended to the segment that is the partition,
as one ledger entry: constant work per batch, compressed or not.

Idempotent producers (a producer id and a base sequence in the batch) append
as writer ``kafka:<producer id>:<epoch>`` with the last record's sequence as
the last event number, their numbers contiguous (``broker.kafka.sequences``):
the segment checks them against its own persisted writer table, whichever
broker or load of the segment took the earlier batches. A resent batch is
dropped as a duplicate and answered with the offset its first copy got if it
is one of the producer's last five, else DUPLICATE_SEQUENCE_NUMBER (written
before, offset unknown); a batch that overlaps what was written without
matching it, or skips past the next sequence, is OUT_OF_ORDER_SEQUENCE_NUMBER.
A batch whose append failed (its ledger failed, or was fenced under it) is
answered once the segment, loaded again here or read where it is not served
here, knows whether the failed ledger stored it (``resolve_failed_append``).

A batch larger than the topic's ``max.message.bytes`` (its ``max_event_bytes``)
is refused with MESSAGE_TOO_LARGE before anything is written, transactional or not.

acks: 1 and -1 (all) both answer once the entry is durable on the ledger's
ack quorum (there is no weaker acknowledgement in Folio); acks=0 sends no
answer at all, as Kafka's broker does. Transactional batches go to
``KafkaContext.transactional_write`` (the transactions' handlers set it),
which places them in the producer's open Folio transaction, then appended by
the same code as any batch (sequences checked, group-committed, a failed
append resolved), inside the coordinator's ``writing`` context;
without it they are refused with TRANSACTIONAL_ID_AUTHORIZATION_FAILED.

A batch for a sealed partition (its topic split or merged) is appended to the
partition's heir, transactional or not (``broker.kafka.succession``); in a
cluster, a batch whose heir another broker owns is forwarded to that broker
(``broker.kafka.forwarding``): a transactional one with the producer's open
transaction, which it joins there as a direct transactional batch does.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import uuid
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from broker.api import Block, SegmentHandle
from broker.errors import BrokerError, EventTooLargeError, SegmentSealedError, WrongHostError
from broker.kafka.access import refused_partitions
from broker.kafka.batches import BatchHeader, InvalidBatchError, parse_batch, split_batches
from broker.kafka.blocks import block_of_batch, with_leader_epoch
from broker.kafka.context import KafkaContext, TxnWrite
from broker.kafka.dispatch import Api, Call, Deferred
from broker.kafka.error_codes import error_code
from broker.kafka.forwarding import AppendBlock as ForwardedAppend
from broker.kafka.forwarding import ForwardedTxn, aborting_if_unknown
from broker.kafka.leader_epochs import leader_epoch, segment_epoch
from broker.kafka.leader_hints import LeaderHints
from broker.kafka.messages import build, nested, response_class
from broker.kafka.partitions import segment_name
from broker.kafka.sequences import answer_of, handed_to_ledger, resolve_failed_append
from broker.kafka.succession import Forward
from broker.segments.block_limits import check_block_size
from ledger.errors import LedgerError
from txnbuffer.api import TxnId

__all__ = ["PRODUCE_KEY", "ROWS", "forwarded_append", "writer_of"]

log = logging.getLogger(__name__)

PRODUCE_KEY = 0
_ZERO = datetime.timedelta(0)


def writer_of(header: BatchHeader) -> tuple[str, int]:
    """The Folio writer id and last event number of a batch ("" and -1: not idempotent)."""
    if header.producer_id < 0 or header.base_sequence < 0:
        return "", -1
    return f"kafka:{header.producer_id}:{header.producer_epoch}", header.last_sequence


async def handle_produce(context: KafkaContext, call: Call) -> Deferred:
    """Check and start each partition's append; the answers come with the ``Deferred``.

    Every append is called before this returns, so the next request of the
    connection appends after this one (``broker.kafka.connection``).
    """
    request = call.request
    by_id = call.version >= 13
    keys: list[str] = []
    names: dict[str, str | None] = {}
    for topic in request.topic_data:
        key = str(topic.topic_id or uuid.UUID(int=0)) if by_id else str(topic.name)
        keys.append(key)
        if key not in names:
            names[key] = await _name_of(context, key) if by_id else key
    parts = [(names[key] or key, partition.index, partition.records)
             for key, topic in zip(keys, request.topic_data, strict=True)
             for partition in topic.partition_data]
    unknown = [key for key in keys if names[key] is None]
    refused: dict[str, _Outcome] = {key: (ErrorCode.unknown_topic_id, -1,
                                          f"no topic has id {key}") for key in unknown}
    refused.update(refused_partitions(context, call, [
        part for part in parts if part[0] not in refused]))
    started = [refused.get(name) or await _start(context, name, index, records,
                                                 request.transactional_id, call.version)
               for name, index, records in parts]
    jobs = [(key, partition.index) for key, topic in zip(keys, request.topic_data, strict=True)
            for partition in topic.partition_data]
    return Deferred(_answer(context, call, jobs, started, names))


async def _name_of(context: KafkaContext, key: str) -> str | None:
    """The name of the topic of id ``key`` (v13+); None if no topic has it."""
    try:
        return await context.topic_ids.name_of(context.topics, uuid.UUID(key))
    except (BrokerError, LedgerError) as error:
        # The topic list cannot be read now: answered as an unknown id (retriable).
        log.info("kafka: Produce by topic id %s: the topics cannot be listed: %s", key, error)
        return None


async def _answer(context: KafkaContext, call: Call, jobs: list[tuple[str, int]],
                  started: list[_Started], names: dict[str, str | None]) -> Any:
    """The answer once every append is done; ``names``: each topic key's name (None: no topic).

    The leader hints (v10+) are read after the appends, from the owner cache
    as it is then (``broker.kafka.leader_hints``).
    """
    # Shielded: if the connection goes (the answer is cancelled), each append
    # still finishes and notes its offset, which the producer's resend of the
    # same batch is then answered with.
    results = [await asyncio.shield(outcome) if isinstance(outcome, asyncio.Future)
               else outcome for outcome in started]
    if call.request.acks == 0:
        return None
    by_id = call.version >= 13
    cls = response_class(PRODUCE_KEY, call.version)
    topic_cls = nested(cls, "TopicProduceResponse")
    partition_cls = nested(cls, "PartitionProduceResponse")
    hints = LeaderHints(context.nodes, cls, call.version >= 10)
    by_topic: dict[str, list[Any]] = {}
    for (key, index), (code, offset, message) in zip(jobs, results, strict=True):
        name = names.get(key)
        leader = {} if name is None else hints.current_leader(name, index, code)
        by_topic.setdefault(key, []).append(build(
            partition_cls, index=index, error_code=code, base_offset=offset,
            log_append_time=None, log_start_offset=-1, record_errors=(),
            error_message=message, **leader))
    # ``key``: the topic's name, or (v13+) its id's text.
    responses = tuple(build(topic_cls, partition_responses=tuple(parts),
                            **({"topic_id": uuid.UUID(key)} if by_id else {"name": key}))
                      for key, parts in by_topic.items())
    return build(cls, responses=responses, throttle_time=_ZERO, **hints.node_endpoints())


#: (error code, base offset, error message) of one partition.
_Outcome = tuple[ErrorCode, int, str | None]
#: A partition's outcome now (refused) or its append under way.
_Started = _Outcome | asyncio.Future[_Outcome]


async def _start(context: KafkaContext, topic: str, partition: int,
                 records: bytes | None, transactional_id: str | None,
                 version: int) -> _Started:
    """Check one partition's batch and call its append (not awaited)."""
    try:
        batches = split_batches(records or b"")
        if len(batches) != 1:
            return (ErrorCode.invalid_record, -1,
                    f"a Produce partition must carry exactly one record batch, got "
                    f"{len(batches)}")
        batch = batches[0]
        header = parse_batch(batch)
    except InvalidBatchError as error:
        log.warning("kafka: Produce to %s/%d refused: %s", topic, partition, error)
        code = ErrorCode.corrupt_message if error.corrupt else ErrorCode.invalid_record
        return code, -1, str(error)
    if header.control:
        return ErrorCode.invalid_record, -1, "control batches are written by the broker only"
    # Stamped with the partition's leader epoch now (``broker.kafka.leader_epochs``);
    # ``_append`` stamps it again if the segment written (a heir) has another.
    data = block_of_batch(batch, leader_epoch(context.nodes, topic, partition))
    try:
        check_block_size(len(data))
        name = segment_name(topic, partition)
        segment = await context.topics.writable_segment(name, "Kafka Produce")
        _check_max_message_bytes(segment, len(batch))
        txn: TxnWrite | None = None
        if header.transactional:
            if context.transactional_write is None:
                return (ErrorCode.transactional_id_authorization_failed, -1,
                        "Kafka transactions are not served by this broker yet")
            code, message, txn = await _checked_write(
                context, transactional_id, topic, partition, header, version)
            if txn is None:
                return code, -1, message
    except (BrokerError, LedgerError) as error:
        return error_code(error), -1, str(error)
    writer, last = writer_of(header)
    unused = [txn] if txn is not None else []

    async def append(target: SegmentHandle, target_name: str, stream: str,
                     number: int) -> _Outcome:
        # ``broker.kafka.succession``: the partition's segment first, then (if
        # it is sealed) its heir, under the stream's writer id and numbers.
        if txn is None:
            return await _append_in(context, target, target_name, header.records_count,
                                    data, stream, number, None)
        info = target.info()
        if info.sealed:  # not registered in the transaction: its heir is
            raise SegmentSealedError(target_name, info.segment.end_offset)
        if target_name == name and unused:
            place: TxnWrite | None = unused.pop()
        elif context.transactional_write is None:  # (set when ``txn`` was made)
            return (ErrorCode.transactional_id_authorization_failed, -1,
                    "Kafka transactions are not served by this broker yet")
        else:
            code, message, place = await context.transactional_write(
                context, transactional_id, target_name, header)
            if place is None:
                return code, -1, message
        return await _append_in(context, target, target_name, header.records_count, data,
                                stream, number, place)

    # A task: its first step (the segment's numbering and submit) runs before
    # any later request's, in the order the tasks are made. A transactional
    # one's first step enters the coordinator's ``writing``, whose per-segment
    # FIFO lock keeps that order while the segment is being registered. A
    # sealed partition's batch goes to its heir (``broker.kafka.succession``).
    # In a cluster, a batch whose heir another broker owns is forwarded there
    # (``broker.kafka.forwarding``); a transactional one with the transaction
    # found for it here, which it joins there (``forwarded_append``).
    forward = _forward_of(context, data, header, None if txn is None else txn[0],
                          transactional_id)
    return context.succession.start(context.topics, segment, name, writer, last,
                                    header.records_count, append, forward)


def _forward_of(context: KafkaContext, data: bytes, header: BatchHeader,
                txn_id: TxnId | None, transactional_id: str | None) -> Forward | None:
    """How the batch goes to a heir another broker owns (None: not a cluster).

    A transactional batch goes with the transaction found for it here; an
    outcome the hop leaves unknown aborts that transaction
    (``broker.kafka.forwarding.aborting_if_unknown``).
    """
    if context.forwarder is None:
        return None
    if txn_id is None:
        return context.forwarder.forward_of(data, header.records_count)
    forwarded = ForwardedTxn(txn_id, transactional_id or "", header.producer_id,
                             header.producer_epoch)
    forward = context.forwarder.forward_of(data, header.records_count, forwarded)
    cluster = None if context.coordinators is None else context.coordinators.cluster_txns
    return forward if cluster is None else aborting_if_unknown(forward, forwarded,
                                                               cluster.abort_unknown)


async def _checked_write(context: KafkaContext, transactional_id: str | None, topic: str,
                         partition: int, header: BatchHeader, version: int,
                         ) -> tuple[ErrorCode, str | None, TxnWrite | None]:
    """``transactional_write`` of the partition's segment, after KIP-890's check (added?)."""
    if context.transactional_check is not None:
        code, message = await context.transactional_check(
            context, transactional_id, topic, partition, header, version)
        if code is not ErrorCode.none:
            return code, message, None
    if context.transactional_write is None:  # (the caller checked it)
        return (ErrorCode.transactional_id_authorization_failed,
                "Kafka transactions are not served by this broker yet", None)
    return await context.transactional_write(context, transactional_id,
                                             segment_name(topic, partition), header)


def _check_max_message_bytes(segment: SegmentHandle, batch_bytes: int) -> None:
    """``EventTooLargeError`` (MESSAGE_TOO_LARGE): a batch above the topic's ``max.message.bytes``.

    Kafka's ``max.message.bytes`` bounds a record batch as sent (after
    compression); DescribeConfigs reports it as the topic's ``max_event_bytes``.
    """
    limit = segment.config.max_event_bytes
    if batch_bytes > limit:
        raise EventTooLargeError(batch_bytes, limit,
                                 f"record batch (max.message.bytes of {segment.name})")


async def _append_in(context: KafkaContext, segment: SegmentHandle, name: str,
                     records_count: int, data: bytes, writer: str, last: int,
                     txn: TxnWrite | None) -> _Outcome:
    """``_append``, inside the transaction's ``writing`` context for a transactional batch."""
    if txn is None:
        return await _append(context, segment, name, records_count, data, writer, last)
    txn_id, writing = txn
    try:
        async with writing:
            return await _append(context, segment, name, records_count, data, writer,
                                 last, txn_id)
    except SegmentSealedError:
        raise  # nothing appended: the batch goes to the heir
    except (BrokerError, LedgerError) as error:
        # Entering ``writing`` failed: the transaction is no longer OPEN (its
        # timeout aborted it; INVALID_TXN_STATE: the producer must abort), or
        # the segment could not be registered. Nothing was appended.
        return error_code(error), -1, str(error)


def forwarded_append(context: KafkaContext) -> ForwardedAppend:
    """How a batch forwarded from another broker is appended here (``broker.kafka.forwarding``).

    As any batch: sequences checked, group-committed, a failed append
    resolved (``_append``); a transactional one in the producer's open
    transaction, found, registered and marked here as a direct transactional
    batch's (``_forwarded_txn_append``).
    """
    async def append(segment: SegmentHandle, name: str, writer: str, last: int,
                     records_count: int, data: bytes, txn: ForwardedTxn | None) -> _Outcome:
        if txn is None:
            return await _append(context, segment, name, records_count, data, writer, last)
        return await _forwarded_txn_append(context, segment, name, writer, last,
                                           records_count, data, txn)
    return append


@dataclass(frozen=True, slots=True)
class _ForwardedHeader:
    """What ``KafkaContext.transactional_write`` reads of a forwarded batch's header."""

    producer_id: int
    producer_epoch: int
    records_count: int


async def _forwarded_txn_append(context: KafkaContext, segment: SegmentHandle, name: str,
                                writer: str, last: int, records_count: int, data: bytes,
                                txn: ForwardedTxn) -> _Outcome:
    """A transactional batch forwarded here, appended to heir ``name`` in its transaction.

    The producer's open transaction is asked of the Kafka transaction
    coordinator (``transactional_write``: ``FindKafkaTxn``), and must be the
    one the partition's owner sent the batch in: a late copy of a call (its
    answer lost, the transaction decided since) never joins the producer's
    next transaction (INVALID_TXN_STATE, nothing written). The append then
    registers the heir in the transaction and runs inside the participant's
    ``writing``, whose marker at EndTxn closes the heir for the transaction:
    a copy arriving after it is refused, so the transaction holds the batch
    once (the heir's writer state drops a second copy) or not at all.
    """
    info = segment.info()
    if info.sealed:  # not registered in the transaction: its heir is
        raise SegmentSealedError(name, info.segment.end_offset)
    if context.transactional_write is None:
        return (ErrorCode.transactional_id_authorization_failed, -1,
                "Kafka transactions are not served by this broker")
    header = _ForwardedHeader(txn.producer_id, txn.producer_epoch, records_count)
    code, message, place = await context.transactional_write(
        context, txn.transactional_id, name, header)
    if place is None:
        return code, -1, message
    if place[0] != txn.txn_id:
        log.info("kafka: a transactional batch forwarded to %s for a transaction no longer "
                 "open (producer %d, epoch %d): INVALID_TXN_STATE", name, txn.producer_id,
                 txn.producer_epoch)
        return (ErrorCode.invalid_txn_state, -1,
                "the batch's transaction is no longer open at the transaction coordinator")
    return await _append_in(context, segment, name, records_count, data, writer, last, place)


async def _append(context: KafkaContext, segment: SegmentHandle, name: str,
                  records_count: int, data: bytes, writer: str, last: int,
                  txn_id: TxnId | None = None) -> _Outcome:
    """Append to ``name``; raises ``SegmentSealedError`` if it is sealed (nothing written)."""
    blocks = [Block(with_leader_epoch(data, segment_epoch(context.nodes, name)), records_count)]
    try:
        try:
            result = await segment.append(blocks, writer, last, txn_id=txn_id,
                                          contiguous=bool(writer))
        except (BrokerError, LedgerError) as error:
            if not writer or not handed_to_ledger(error):
                raise
            # Its entry may have reached a bookie: answered once the segment,
            # loaded again (or read where it is not served here), knows
            # (``broker.kafka.sequences``).
            ledgers = segment.info().ledgers
            try:
                return await resolve_failed_append(
                    context.topics, name, blocks, writer, last, error,
                    failed_ledger_id=ledgers[-1].ledger_id if ledgers else None)
            except WrongHostError as unknown:
                if unknown is not error:
                    raise
                # Fenced under the add and still not decided at the deadline:
                # possibly written (never "not written": NOT_LEADER_OR_FOLLOWER).
                return (ErrorCode.request_timed_out, -1,
                        f"the outcome of the append to {name} is unknown: {error}")
    except SegmentSealedError:
        raise  # nothing appended: the batch goes to the heir
    except (BrokerError, LedgerError) as error:
        return error_code(error), -1, str(error)
    return answer_of(result, writer, name)


ROWS = (Api(PRODUCE_KEY, "Produce", 3, 13, handle_produce),)
