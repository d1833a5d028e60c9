"""Fetch (key 1), v4-v17: record batches from offsets, with long polling and isolation.

v7+ requests may use an incremental fetch session (KIP-227,
``broker.kafka.fetch_sessions``: which partitions a request reads and which
its answer carries). v13+ requests name topics by id (``broker.kafka.topic_ids``):
an id no topic has is answered UNKNOWN_TOPIC_ID for its partitions, under
that id. v15's ``replica_state`` and v17's ``replica_directory_id`` are a
follower's (Kafka's replication) and ignored. v16+ answers name the current
leader of a partition refused NOT_LEADER_OR_FOLLOWER, and its address, when
another broker of the cluster owns it (KIP-951, ``broker.kafka.leader_hints``).

Each partition is read from its segment (``SegmentHandle.read``) from the
fetch offset, about ``partition_max_bytes`` of whole blocks (at least one,
as Kafka serves at least one batch, KIP-74; partitions after the answer's
``max_bytes``, at most ``MAX_FETCH_BYTES``, is reached are left empty), each block turned into its
record batch (``broker.kafka.blocks``: constant work for batches written
through Kafka). While the answer has fewer than ``min_bytes`` and
``max_wait_ms`` has not passed, the handler waits for data on any of the
partitions asked (the segments' wake-ups, never a timer loop), then reads
those that had nothing again.

Isolation: ``read_uncommitted`` (0) reads every data entry;
``read_committed`` (1) is Folio's READ_COMMITTED: it stops at the
transaction buffer's max read position (the last stable offset answered)
and leaves out aborted transactions' entries, so a Kafka consumer sees
offset gaps where aborted data lies, as after compaction, and the list of
aborted transactions is always empty (``aborted_transactions``: the hook
where a front-end that served aborted batches would list them).

A partition whose segment cannot be read now (a ``LedgerError``: bookies
down, ZooKeeper away) answers KAFKA_STORAGE_ERROR, which consumers retry
after a metadata refresh without telling the application
(``read_error_code``).
"""

from __future__ import annotations

import asyncio
import datetime
import uuid
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from broker.api import Isolation, SegmentHandle
from broker.errors import BrokerError
from broker.kafka.access import TOPIC_CONSUME, allowed
from broker.kafka.blocks import batch_of_block
from broker.kafka.context import KafkaContext
from broker.kafka.dispatch import Api, Call
from broker.kafka.error_codes import error_code
from broker.kafka.fetch_sessions import FetchPlan, PartitionKey, PartitionState, Wanted
from broker.kafka.leader_epochs import NO_EPOCH, epoch_error
from broker.kafka.leader_hints import LeaderHints
from broker.kafka.messages import build, nested, response_class
from broker.kafka.partitions import segment_name
from ledger.errors import LedgerError

__all__ = ["FETCH_KEY", "ROWS", "isolation_of", "read_error_code"]

FETCH_KEY = 1
_ZERO = datetime.timedelta(0)
#: Longest wait a client may ask for (Kafka's clients ask 500 ms by default).
MAX_WAIT_S = 30.0
#: Most bytes one Fetch answer carries, whatever the client asks (Kafka's
#: broker setting ``fetch.max.bytes``, 55 MiB by default), so a client cannot
#: make the broker hold more per connection.
MAX_FETCH_BYTES = 55 * 1024 * 1024
#: Reads past runs of left-out entries per partition and round (each read
#: skips up to 512 entries).
_SKIPS_PER_READ = 16


def read_error_code(error: BrokerError | LedgerError) -> ErrorCode:
    """The code of a partition whose segment cannot be opened or read now.

    Storage that fails a read (bookies down, the metadata store away, a
    segment loading again) is KAFKA_STORAGE_ERROR, as Kafka answers a replica
    whose log is offline: consumers refresh their metadata and fetch again,
    quietly. The table's REQUEST_TIMED_OUT (right for an append, whose
    outcome it says is unknown) is no Fetch answer Kafka gives, and
    librdkafka hands it to the application as a consumer error.
    """
    if isinstance(error, LedgerError):
        return ErrorCode.kafka_storage_error
    return error_code(error)


def isolation_of(level: int) -> Isolation:
    """Kafka's isolation level (0 read_uncommitted, 1 read_committed) as Folio's."""
    return Isolation.READ_COMMITTED if level == 1 else Isolation.READ_UNCOMMITTED


@dataclass
class _Partition:
    topic: str
    partition: int
    offset: int
    max_bytes: int
    segment: SegmentHandle | None = None
    error: ErrorCode = ErrorCode.none
    batches: list[bytes] = field(default_factory=list)
    size: int = 0
    high_watermark: int = -1
    last_stable: int = -1
    log_start: int = -1
    #: Sealed and read to its end: nothing more will come, do not wait on it.
    ended: bool = False
    #: The topic as the request names it: its name (v4-v12) or its id's text (v13+).
    key: str = ""


def _topic_key(topic: Any, by_id: bool) -> str:
    """The topic as a request names it (``PartitionKey``): name, or id text (v13+)."""
    if by_id:
        return str(topic.topic_id or uuid.UUID(int=0))
    return str(topic.topic)


def _plan(context: KafkaContext, call: Call, by_id: bool) -> FetchPlan:
    """The partitions this request reads, through its fetch session (v7+) if any."""
    request = call.request
    wanted = [Wanted((_topic_key(topic, by_id), p.partition), p.fetch_offset,
                     p.partition_max_bytes)
              for topic in request.topics for p in topic.partitions]
    if call.version < 7:
        return FetchPlan(wanted)
    forgotten = [(_topic_key(topic, by_id), number)
                 for topic in request.forgotten_topics_data for number in topic.partitions]
    return context.fetch_sessions.plan(request.session_id, request.session_epoch, wanted,
                                       forgotten, by_id=by_id)


async def _partition(context: KafkaContext, wanted: Wanted, budget: int,
                     by_id: bool) -> _Partition:
    """The partition to read; UNKNOWN_TOPIC_ID for an id no topic has (v13+)."""
    key, number = wanted.key
    part = _Partition(key, number, wanted.fetch_offset,
                      min(max(wanted.max_bytes, 1), budget), key=key)
    if by_id:
        try:
            name = await context.topic_ids.name_of(context.topics, uuid.UUID(key))
        except (BrokerError, LedgerError) as error:
            part.error = read_error_code(error)
            return part
        if name is None:
            part.error = ErrorCode.unknown_topic_id
        else:
            part.topic = name
    return part


async def handle_fetch(context: KafkaContext, call: Call) -> Any:
    """Record batches of each partition asked, waiting up to max_wait for min_bytes."""
    request = call.request
    by_id = call.version >= 13
    plan = _plan(context, call, by_id)
    if plan.error is not ErrorCode.none:
        return build(response_class(FETCH_KEY, call.version), throttle_time=_ZERO,
                     error_code=plan.error, session_id=0, responses=())
    isolation = isolation_of(request.isolation_level)
    budget = min(max(request.max_bytes, 1), MAX_FETCH_BYTES)
    parts = [await _partition(context, wanted, budget, by_id) for wanted in plan.reads]
    _check_epochs(context, call, parts, by_id)
    loop = asyncio.get_running_loop()
    wait_s = min(max(request.max_wait.total_seconds(), 0.0), MAX_WAIT_S)
    deadline = loop.time() + wait_s
    for part in parts:
        if part.error is not ErrorCode.none:
            continue
        if allowed(context, call, TOPIC_CONSUME, part.topic):
            await _open(context, part)
        else:
            part.error = TOPIC_CONSUME.refused
    while True:
        total = 0
        for part in parts:
            if not part.batches and part.error is ErrorCode.none and total < budget:
                await _read(part, isolation)
            total += part.size
        remaining = deadline - loop.time()
        if (total >= max(request.min_bytes, 1) or remaining <= 0
                or context.stopping.is_set() or any(p.error is not ErrorCode.none for p in parts)
                or not await _wait_any(context, parts, isolation, remaining)):
            break
    return _answer(context, call, parts, isolation, plan, by_id)


def _check_epochs(context: KafkaContext, call: Call, parts: list[_Partition],
                  by_id: bool) -> None:
    """FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH for a stale or unknown ``current_leader_epoch``.

    v9+ (``broker.kafka.leader_epochs``). Only the partitions the request
    lists are checked: those a fetch session carries without listing them have
    no epoch in this request (the client lists a partition again when its
    epoch changes).
    """
    if call.version < 9:
        return
    asked = {(_topic_key(topic, by_id), p.partition): p.current_leader_epoch
             for topic in call.request.topics for p in topic.partitions}
    for part in parts:
        current = asked.get((part.key, part.partition), NO_EPOCH)
        if part.error is ErrorCode.none:
            part.error = epoch_error(context.nodes, part.topic, part.partition, current)


async def _open(context: KafkaContext, part: _Partition) -> None:
    try:
        part.segment = await context.topics.segment(segment_name(part.topic, part.partition))
    except (BrokerError, LedgerError) as error:
        part.error = read_error_code(error)


async def _read(part: _Partition, isolation: Isolation) -> None:
    """Read the partition's batches; past entries left out, so waits start after them."""
    segment = part.segment
    if segment is None:
        return
    try:
        for _ in range(_SKIPS_PER_READ):
            batch = await segment.read(part.offset, part.max_bytes, isolation)
            part.batches = [batch_of_block(block) for block in batch.blocks]
            part.ended = batch.end_of_segment and not batch.blocks
            # Only left-out entries (aborted transactions, markers) before the
            # tail: look after them, here and in the wait (else the wait, which
            # sees data past the offset, would return at once, again and again).
            # The answer still starts at the client's offset: it will skip
            # them again, as a Kafka consumer skips an aborted range.
            if batch.blocks or part.ended or batch.next_offset <= part.offset:
                break
            part.offset = batch.next_offset
    except (BrokerError, LedgerError) as error:
        part.error = read_error_code(error)
    part.size = sum(map(len, part.batches))
    _note_offsets(part, segment)


def _note_offsets(part: _Partition, segment: SegmentHandle) -> None:
    info = segment.info().segment
    part.high_watermark = info.end_offset
    part.log_start = info.start_offset
    part.last_stable = segment.committed_end


async def _wait_any(context: KafkaContext, parts: list[_Partition], isolation: Isolation,
                    timeout_s: float) -> bool:
    """Wait until a partition that had nothing has data, or ``timeout_s``; False on timeout."""
    waits = [asyncio.ensure_future(part.segment.wait_for_data(part.offset, timeout_s, isolation))
             for part in parts if part.segment is not None and not part.batches
             and not part.ended]
    if not waits:
        return False
    stop = asyncio.ensure_future(context.stopping.wait())
    try:
        done, _ = await asyncio.wait([*waits, stop], timeout=timeout_s,
                                     return_when=asyncio.FIRST_COMPLETED)
    finally:
        for future in (*waits, stop):
            if not future.done():
                future.cancel()
        await asyncio.gather(*waits, stop, return_exceptions=True)
    return any(w in done and not w.cancelled() and w.exception() is None and w.result()
               for w in waits)


def _answer(context: KafkaContext, call: Call, parts: list[_Partition], isolation: Isolation,
            plan: FetchPlan, by_id: bool) -> Any:
    cls = response_class(FETCH_KEY, call.version)
    topic_cls = nested(cls, "FetchableTopicResponse")
    data_cls = nested(cls, "PartitionData")
    hints = LeaderHints(context.nodes, cls, call.version >= 16)
    states: dict[PartitionKey, PartitionState] = {}
    for part in parts:
        if part.segment is not None and part.high_watermark < 0:
            _note_offsets(part, part.segment)
        if isolation is not Isolation.READ_COMMITTED:
            part.last_stable = part.high_watermark
        states[part.key, part.partition] = PartitionState(
            part.high_watermark, part.last_stable, part.log_start, bool(part.batches),
            part.error)
    session_id, carried = plan.answer(states)
    answered = set(carried)
    by_topic: dict[str, list[Any]] = {}
    for part in parts:
        if (part.key, part.partition) not in answered:
            continue  # an incremental answer: nothing new here
        by_topic.setdefault(part.key, []).append(build(
            data_cls, partition_index=part.partition, error_code=part.error,
            high_watermark=part.high_watermark, last_stable_offset=part.last_stable,
            log_start_offset=part.log_start, aborted_transactions=aborted_transactions(part),
            preferred_read_replica=-1, records=b"".join(part.batches),
            **hints.current_leader(part.topic, part.partition, part.error)))
    if by_id:
        responses = tuple(build(topic_cls, topic_id=uuid.UUID(key), partitions=tuple(items))
                          for key, items in by_topic.items())
    else:
        responses = tuple(build(topic_cls, topic=key, partitions=tuple(items))
                          for key, items in by_topic.items())
    return build(cls, throttle_time=_ZERO, error_code=ErrorCode.none, session_id=session_id,
                 responses=responses, **hints.node_endpoints())


def aborted_transactions(part: _Partition) -> tuple[Any, ...]:
    """Aborted transactions in the batches served: none, as they are left out (module doc)."""
    del part
    return ()


ROWS = (Api(FETCH_KEY, "Fetch", 4, 17, handle_fetch),)
