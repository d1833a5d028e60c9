"""A batch for a sealed partition whose heir another broker owns is forwarded there, once.

A real ``TopicManager`` on a real bookie, seen as two brokers: the origin
serves only partition ``t/0`` (``OwnedTopics``), the callee every other
segment. The forwarding hop (``SendBatch``) calls the callee's side
(``broker.kafka.forwarding.serve``) in process, through a fault wrapper that
can lose the answer after the callee applied the call: the hop's answer is
then unknown, and the batch must be stored once whatever the origin and the
producer do next (docs/kafka.md, "Partitions and scaling"). A transactional
batch goes with its transaction, which the heir's owner appends it in only
while it is the producer's open one; an outcome left unknown aborts it.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, cast

import pytest
from kio.schema.errors import ErrorCode

from broker._proto.v1 import kafka_internal_pb2
from broker.api import Block, SegmentHandle, TopicConfig
from broker.cluster.owned_topics import OwnedTopics
from broker.errors import BrokerShuttingDownError, InvalidArgumentError, WrongHostError
from broker.kafka.context import KafkaContext, TxnWrite
from broker.kafka.forwarding import (
    AppendBlock,
    ForwardedTxn,
    HeirForwarder,
    aborting_if_unknown,
    serve,
)
from broker.kafka.handlers.produce import forwarded_append
from broker.kafka.succession import UNKNOWN_BASE_OFFSET, Outcome, Succession
from broker.topics.manager import TopicManager
from txnbuffer.api import TxnId
from txnbuffer.txn_ids import txn_id_to_bytes

pytestmark = pytest.mark.faults

WRITER = "kafka:9:0"
CALLEE = "callee:1"


async def _append(segment: SegmentHandle, name: str, writer: str, last: int) -> Outcome:
    """What the Produce handler's append does, short of its failure handling."""
    result = await segment.append([Block(f"{name}-{last}".encode(), 2)], writer, last,
                                  contiguous=bool(writer))
    if result.duplicate and result.offset < 0:
        return ErrorCode.duplicate_sequence_number, -1, None
    return ErrorCode.none, result.offset, None


async def _append_block(segment: SegmentHandle, name: str, writer: str, last: int,
                        count: int, data: bytes, txn: ForwardedTxn | None = None) -> Outcome:
    result = await segment.append([Block(data, count)], writer, last, contiguous=bool(writer),
                                  txn_id=None if txn is None else txn.txn_id)
    if result.duplicate and result.offset < 0:
        return ErrorCode.duplicate_sequence_number, -1, None
    return ErrorCode.none, result.offset, None


class LossyHop:
    """The hop to the callee; the first ``lose`` answers are lost after the callee applied it."""

    def __init__(self, callee: OwnedTopics, lose: int = 0,
                 append: AppendBlock = _append_block) -> None:
        self.callee = callee
        self.lose = lose
        self.append = append
        self.calls: list[str] = []

    async def __call__(self, address: str, request: kafka_internal_pb2.AppendKafkaBatchRequest
                       ) -> kafka_internal_pb2.AppendKafkaBatchResponse:
        self.calls.append(address)
        if address != CALLEE:  # a stale owner: refused, nothing written
            raise WrongHostError(request.segment, CALLEE)
        answer = await serve(self.callee, self.append, None, request)
        if self.lose > 0:
            self.lose -= 1
            raise BrokerShuttingDownError(f"broker {address} did not answer the internal call "
                                          "(DEADLINE_EXCEEDED): the answer was lost")
        return answer


def _views(topics: TopicManager) -> tuple[OwnedTopics, OwnedTopics]:
    """(the origin: owns t/0 only; the callee: owns every other segment)."""
    origin = OwnedTopics(topics, lambda name: name == "t/0",
                         lambda name: "" if name == "t/0" else CALLEE)
    callee = OwnedTopics(topics, lambda name: name != "t/0",
                         lambda name: CALLEE if name != "t/0" else "origin:1")
    return origin, callee


async def _sealed_topic(topics: TopicManager, origin: OwnedTopics) -> Succession:
    """Topic ``t`` whose partition 0 holds sequences 0-1, then split (heir ``t/1``)."""
    await topics.create_topic("t", 1, TopicConfig())
    succession = Succession()
    first = await _send(succession, origin, 1, None)
    assert first == (ErrorCode.none, 0, None)
    await topics.scale_topic("t", ["t/0"], [(0.0, 0.5), (0.5, 1.0)])  # t/1, t/2
    return succession


async def _send(succession: Succession, origin: OwnedTopics, last: int,
                forwarder: HeirForwarder | None, writer: str = WRITER) -> Outcome:
    """One two-record batch (sequences ``last - 1``, ``last``) for partition 0, at the origin."""
    segment = await origin.writable_segment("t/0", "test")
    forward = None if forwarder is None else forwarder.forward_of(b"t/1-batch", 2)
    return await succession.start(origin, segment, "t/0", writer, last, 2, _append, forward)


async def test_a_lost_answer_is_asked_again_and_the_batch_stored_once(
        topics: TopicManager) -> None:
    origin, callee = _views(topics)
    succession = await _sealed_topic(topics, origin)
    hop = LossyHop(callee, lose=1)
    forwarder = HeirForwarder(hop, lambda name: "stale:1")
    # The first call (to the owner the walk's WrongHost named) has its answer
    # lost after the callee appended; the origin asks again (the owner cache's
    # stale answer refuses and names the callee), and the heir drops the copy.
    assert await _send(succession, origin, 3, forwarder) == (
        ErrorCode.none, UNKNOWN_BASE_OFFSET, None)
    assert hop.calls == [CALLEE, "stale:1", CALLEE]
    heir = await topics.segment("t/1")
    assert heir.info().segment.end_offset == 2
    assert await heir.last_event_number(f"{WRITER}@0") == 1
    # The producer's resend of the same batch (its own answer lost) is a duplicate.
    assert await _send(succession, origin, 3, HeirForwarder(LossyHop(callee), lambda _: CALLEE)) \
        == (ErrorCode.none, UNKNOWN_BASE_OFFSET, None)
    assert heir.info().segment.end_offset == 2
    # The next batch goes on after it.
    assert await _send(succession, origin, 5, HeirForwarder(LossyHop(callee), lambda _: CALLEE)) \
        == (ErrorCode.none, UNKNOWN_BASE_OFFSET, None)
    assert heir.info().segment.end_offset == 4  # (two records a batch)
    assert await heir.last_event_number(f"{WRITER}@0") == 3


async def test_answers_lost_until_the_deadline_are_request_timed_out_and_the_resend_is_stored_once(
        topics: TopicManager) -> None:
    origin, callee = _views(topics)
    succession = await _sealed_topic(topics, origin)
    hop = LossyHop(callee, lose=1_000)
    code, offset, message = await _send(
        succession, origin, 3, HeirForwarder(hop, lambda _: CALLEE, timeout_s=0.3))
    # Maybe written (it was): never a "not written" code.
    assert (code, offset) == (ErrorCode.request_timed_out, -1)
    assert message is not None and "outcome unknown" in message
    assert len(hop.calls) >= 2
    heir = await topics.segment("t/1")
    assert heir.info().segment.end_offset == 2
    # librdkafka resends the batch under the same sequences: stored once.
    assert await _send(succession, origin, 3, HeirForwarder(LossyHop(callee), lambda _: CALLEE)) \
        == (ErrorCode.none, UNKNOWN_BASE_OFFSET, None)
    assert heir.info().segment.end_offset == 2


async def test_a_producer_without_idempotence_is_not_sent_twice(topics: TopicManager) -> None:
    origin, callee = _views(topics)
    await topics.create_topic("t", 1, TopicConfig())
    await topics.scale_topic("t", ["t/0"], [(0.0, 0.5), (0.5, 1.0)])
    hop = LossyHop(callee, lose=1)
    code, offset, message = await _send(Succession(), origin, -1,
                                        HeirForwarder(hop, lambda _: CALLEE), writer="")
    # No numbers to drop a copy with: one call, its outcome unknown to the producer.
    assert (code, offset, hop.calls) == (ErrorCode.request_timed_out, -1, [CALLEE])
    assert message is not None and "unknown" in message
    assert (await topics.segment("t/1")).info().segment.end_offset == 2


async def test_without_a_forwarder_a_remote_heir_is_not_leader(topics: TopicManager) -> None:
    origin, _ = _views(topics)
    succession = await _sealed_topic(topics, origin)
    code, _, message = await _send(succession, origin, 3, None)
    assert code is ErrorCode.not_leader_or_follower
    assert message is not None and "t/1" in message
    assert (await topics.segment("t/1")).info().segment.end_offset == 0


async def test_the_callee_refuses_a_segment_it_does_not_own_and_bad_requests(
        topics: TopicManager) -> None:
    origin, callee = _views(topics)
    await topics.create_topic("t", 1, TopicConfig())
    request = kafka_internal_pb2.AppendKafkaBatchRequest(
        segment="t/0", writer_id=f"{WRITER}@0", last_event_number=1, event_count=2,
        data=b"x")
    # Not its segment: WRONG_HOST naming the owner (nothing written), so the
    # caller asks the owner.
    with pytest.raises(WrongHostError) as refused:
        await serve(callee, _append_block, None, request)
    assert (refused.value.segment, refused.value.owner) == ("t/0", "origin:1")
    assert (await topics.segment("t/0")).info().segment.end_offset == 0
    for bad in (kafka_internal_pb2.AppendKafkaBatchRequest(segment="t/0", event_count=1),
                kafka_internal_pb2.AppendKafkaBatchRequest(data=b"x", event_count=1),
                kafka_internal_pb2.AppendKafkaBatchRequest(segment="t/0", data=b"x")):
        with pytest.raises(InvalidArgumentError, match="AppendKafkaBatch needs"):
            await serve(origin, _append_block, None, bad)
    # Its own open segment: appended, the offset answered.
    answer = await serve(origin, _append_block, None, request)
    assert (answer.error_code, answer.base_offset, answer.error_message) == (0, 0, "")


async def test_a_lost_answer_then_refusals_until_the_deadline_is_never_not_written(
        topics: TopicManager) -> None:
    origin, callee = _views(topics)
    succession = await _sealed_topic(topics, origin)
    hop = LossyHop(callee, lose=1)

    class LostThenMoved:
        """The first call is applied and its answer lost; then every broker refuses."""

        calls = 0

        async def __call__(self, address: str,
                           request: kafka_internal_pb2.AppendKafkaBatchRequest,
                           ) -> kafka_internal_pb2.AppendKafkaBatchResponse:
            self.calls += 1
            if self.calls == 1:
                return await hop(CALLEE, request)
            raise WrongHostError(request.segment, "")

    send = LostThenMoved()
    code, offset, message = await _send(
        succession, origin, 3, HeirForwarder(send, lambda _: CALLEE, timeout_s=0.3))
    # Stored by the first call: REQUEST_TIMED_OUT (maybe written), never
    # NOT_LEADER_OR_FOLLOWER, after which an epoch bump could store it twice.
    assert (code, offset) == (ErrorCode.request_timed_out, -1)
    assert message is not None and "outcome unknown" in message
    assert send.calls >= 2
    assert (await topics.segment("t/1")).info().segment.end_offset == 2


# -- transactional batches (their heir's owner joins them to the open transaction) ---------

TXN = ForwardedTxn((7, 8), "tx", 9, 0)


async def test_a_transactional_batch_carries_its_transaction_and_is_stored_once(
        topics: TopicManager) -> None:
    origin, callee = _views(topics)
    succession = await _sealed_topic(topics, origin)
    seen: list[ForwardedTxn | None] = []

    async def append(segment: SegmentHandle, name: str, writer: str, last: int, count: int,
                     data: bytes, txn: ForwardedTxn | None) -> Outcome:
        seen.append(txn)
        return await _append_block(segment, name, writer, last, count, data, txn)
    # The first answer is lost after the heir's owner appended it in the
    # transaction: asked again with the same transaction, dropped as a copy.
    hop = LossyHop(callee, lose=1, append=append)
    segment = await origin.writable_segment("t/0", "test")
    forward = HeirForwarder(hop, lambda _: CALLEE).forward_of(b"t/1-batch", 2, TXN)
    assert await succession.start(origin, segment, "t/0", WRITER, 3, 2, _append, forward) == (
        ErrorCode.none, UNKNOWN_BASE_OFFSET, None)
    assert seen == [TXN, TXN]
    heir = await topics.segment("t/1")
    assert heir.info().segment.end_offset == 2
    assert await heir.last_event_number(f"{WRITER}@0") == 1


async def test_a_transactional_batch_whose_outcome_stays_unknown_aborts_its_transaction(
        topics: TopicManager) -> None:
    origin, callee = _views(topics)
    succession = await _sealed_topic(topics, origin)
    aborted: list[TxnId] = []

    async def abort(txn_id: TxnId) -> bool:
        aborted.append(txn_id)
        return True
    # Every answer lost: the heir holds the batch, its owner never said so. A
    # commit would hold it or not by chance: the transaction is aborted first.
    forwarder = HeirForwarder(LossyHop(callee, lose=1_000), lambda _: CALLEE, timeout_s=0.3)
    forward = aborting_if_unknown(forwarder.forward_of(b"t/1-batch", 2, TXN), TXN, abort)
    segment = await origin.writable_segment("t/0", "test")
    code, offset, message = await succession.start(origin, segment, "t/0", WRITER, 3, 2,
                                                   _append, forward)
    assert (code, offset, aborted) == (ErrorCode.request_timed_out, -1, [TXN.txn_id])
    assert message is not None and "was aborted" in message
    # One answer lost, then answered: known, nothing aborted.
    forwarder = HeirForwarder(LossyHop(callee, lose=1), lambda _: CALLEE)
    forward = aborting_if_unknown(forwarder.forward_of(b"t/1-batch", 2, TXN), TXN, abort)
    assert await succession.start(origin, segment, "t/0", WRITER, 5, 2, _append, forward) == (
        ErrorCode.none, UNKNOWN_BASE_OFFSET, None)
    assert aborted == [TXN.txn_id]
    assert (await topics.segment("t/1")).info().segment.end_offset == 4


class _Txns:
    """``KafkaContext.transactional_write`` of the heir's owner: the producer's open txn."""

    def __init__(self, open_txn: TxnId | None, code: ErrorCode = ErrorCode.none) -> None:
        self.open_txn = open_txn
        self.code = code
        self.asked: list[tuple[str | None, str, int, int]] = []
        self.entered = 0

    async def __call__(self, context: Any, transactional_id: str | None, name: str,
                       header: Any) -> tuple[ErrorCode, str | None, TxnWrite | None]:
        self.asked.append((transactional_id, name, header.producer_id, header.producer_epoch))
        if self.open_txn is None:
            return self.code, f"refused: {self.code.name}", None
        return ErrorCode.none, None, (self.open_txn, self._writing())

    @contextlib.asynccontextmanager
    async def _writing(self) -> AsyncIterator[None]:
        self.entered += 1  # (registration and the marker's count: the participant's)
        yield


def _txn_request(segment: str, last: int, txn_id: bytes) -> Any:
    return kafka_internal_pb2.AppendKafkaBatchRequest(
        segment=segment, writer_id=f"{WRITER}@0", last_event_number=last, event_count=2,
        data=b"batch", txn_id=txn_id, transactional_id=TXN.transactional_id,
        producer_id=TXN.producer_id, producer_epoch=TXN.producer_epoch)


async def test_the_heirs_owner_appends_only_in_the_transaction_the_batch_was_sent_in(
        topics: TopicManager) -> None:
    origin, callee = _views(topics)
    await _sealed_topic(topics, origin)
    heir = await topics.segment("t/1")
    wire = txn_id_to_bytes(TXN.txn_id)
    # The producer's open transaction is another one (the batch's was decided,
    # a late copy of the call): refused, nothing written, nothing registered.
    later = _Txns((7, 9))
    answer = await serve(callee, forwarded_append(cast(KafkaContext, _Context(callee, later))),
                         None, _txn_request("t/1", 1, wire))
    assert answer.error_code == ErrorCode.invalid_txn_state.value
    assert (later.asked, later.entered) == ([("tx", "t/1", 9, 0)], 0)
    assert heir.info().segment.end_offset == 0
    # The coordinator refuses the producer (an older epoch): its code, nothing written.
    fenced = _Txns(None, ErrorCode.invalid_producer_epoch)
    answer = await serve(callee, forwarded_append(cast(KafkaContext, _Context(callee, fenced))),
                         None, _txn_request("t/1", 1, wire))
    assert answer.error_code == ErrorCode.invalid_producer_epoch.value
    assert heir.info().segment.end_offset == 0
    # Its own transaction: appended inside the participant's context; the
    # same call again (its answer lost) is a duplicate, stored once.
    same = _Txns(TXN.txn_id)
    append = forwarded_append(cast(KafkaContext, _Context(callee, same)))
    first = await serve(callee, append, None, _txn_request("t/1", 1, wire))
    again = await serve(callee, append, None, _txn_request("t/1", 1, wire))
    assert (first.error_code, first.base_offset) == (0, 0)
    assert (again.error_code, again.base_offset) == (0, 0)
    assert same.entered == 2
    assert heir.info().segment.end_offset == 2
    # A malformed transaction id: refused before anything is asked.
    for bad in (b"short", bytes(16)):
        with pytest.raises(InvalidArgumentError, match="transactional batch"):
            await serve(callee, append, None, _txn_request("t/1", 3, bad))


@dataclass
class _Context:
    """What ``forwarded_append`` reads of the listener's ``KafkaContext``."""

    topics: OwnedTopics
    transactional_write: _Txns
    #: No cluster view: the batches are stamped with a standalone's leader epoch.
    nodes: None = None
