"""An idempotent producer's batch whose append failed is answered only once its outcome is known.

Issue 22 (items 1 and 8): in a fault run, librdkafka producers' records were
stored twice. A bookie was SIGKILLed; the adds of two one-record batches
(sequences 180 and 181) failed on the broker, which answered the failure at
once, but the entries had reached the other bookie and the segment's next
load recovered them (ledger recovery keeps an entry one bookie holds). The
producer took the batches as not written; its epoch was bumped before it
resent them, so it numbered their records again from 0 under the new epoch,
and the segment stored them a second time.

The fault is injected at the seam of the segment's open ledger handle: the
add really stores the entry, then reports a failure, and every later add
fails at once (as after "no bookie left to replace"). The segment is then
loaded again from its record by a real ``TopicManager`` on a real bookie.
"""

from __future__ import annotations

import asyncio

import pytest
from kio.schema.errors import ErrorCode

from broker.api import TopicConfig
from broker.kafka.sequences import resolve_failed_append
from broker.segments.segment import LedgerSegment
from broker.topics.manager import TopicManager
from ledger.errors import LedgerError, NotEnoughBookiesError
from tests.unit.broker.conftest import BrokerEnv, block, read_all

pytestmark = pytest.mark.faults

WRITER = "kafka:7:0"


def _fail_next_add(segment: LedgerSegment, *, stored: bool) -> list[int]:
    """Fail the next add of ``segment``'s open ledger (after storing it if ``stored``).

    Returns a list that gets the entry id once the bookie holds the entry.
    """
    handle = segment._chain.spans[-1].handle  # the seam: the segment's ledger writer
    assert handle is not None
    real_add = handle.add_async
    held: list[int] = []
    cause = NotEnoughBookiesError("no bookie left to replace (injected)")

    def refuse(data: bytes) -> asyncio.Future[int]:
        raise cause

    def add_async(data: bytes) -> asyncio.Future[int]:
        handle.add_async = refuse  # type: ignore[method-assign]
        failed: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        if not stored:
            failed.set_exception(cause)
            return failed

        def done(added: asyncio.Future[int]) -> None:
            held.append(added.result())
            failed.set_exception(cause)
        real_add(data).add_done_callback(done)
        return failed

    handle.add_async = add_async  # type: ignore[method-assign]
    return held


async def _segment_with_first_batch(topics: TopicManager) -> LedgerSegment:
    await topics.create_topic("t", 1, TopicConfig())
    segment = await topics.segment("t/0")
    assert (await segment.append([block(0, 2)], WRITER, 1, contiguous=True)).offset == 0
    return segment


async def test_a_failed_batch_the_ledger_stored_is_answered_with_its_offset(
        topics: TopicManager) -> None:
    segment = await _segment_with_first_batch(topics)
    held = _fail_next_add(segment, stored=True)
    with pytest.raises(NotEnoughBookiesError) as failed:
        await segment.append([block(1, 2)], WRITER, 3, contiguous=True)  # sequences 2-3
    assert held == [1]  # the bookie holds it: recovery will keep it
    # The next batch (4) was sent before the producer learnt of the failure:
    # refused at once, never handed to the ledger.
    with pytest.raises(LedgerError) as refused:
        await segment.append([block(2)], WRITER, 4, contiguous=True)
    # The answers: the stored batch as written, at its offset (it used to be
    # answered REQUEST_TIMED_OUT, which librdkafka takes as not written and may
    # number again under a new epoch); the refused one as not written.
    assert await resolve_failed_append(topics, "t/0", [block(1, 2)], WRITER, 3,
                                       failed.value) == (ErrorCode.none, 2, None)
    code, offset, _ = await resolve_failed_append(topics, "t/0", [block(2)], WRITER, 4,
                                                  refused.value)
    assert (code, offset) == (ErrorCode.not_enough_replicas, -1)
    loaded = await topics.segment("t/0")
    assert loaded is not segment  # loaded again: its recovery fenced the failed ledger
    assert loaded.end_offset == 4
    # The producer resends batch 4 only: written once, after 2-3.
    assert (await loaded.append([block(2)], WRITER, 4, contiguous=True)).offset == 4
    blocks = await read_all(loaded, 0)
    assert [(b.offset, b.data) for b in blocks] == [
        (0, block(0).data), (2, block(1).data), (4, block(2).data)]


async def test_a_failed_batch_no_bookie_stored_is_answered_not_written(
        topics: TopicManager) -> None:
    segment = await _segment_with_first_batch(topics)
    held = _fail_next_add(segment, stored=False)
    with pytest.raises(NotEnoughBookiesError) as failed:
        await segment.append([block(1, 2)], WRITER, 3, contiguous=True)
    assert held == []
    code, offset, message = await resolve_failed_append(topics, "t/0", [block(1, 2)], WRITER,
                                                        3, failed.value)
    assert (code, offset) == (ErrorCode.not_enough_replicas, -1)
    assert message is not None and "not written to t/0" in message
    loaded = await topics.segment("t/0")
    assert loaded.end_offset == 2  # nothing written by the answer
    assert (await loaded.append([block(1, 2)], WRITER, 3, contiguous=True)).offset == 2
    assert [b.offset for b in await read_all(loaded, 0)] == [0, 2]


async def test_an_outcome_still_unknown_at_the_deadline_is_the_failure(
        env: BrokerEnv, topics: TopicManager, monkeypatch: pytest.MonkeyPatch) -> None:
    segment = await _segment_with_first_batch(topics)
    _fail_next_add(segment, stored=True)
    with pytest.raises(NotEnoughBookiesError) as failed:
        await segment.append([block(1, 2)], WRITER, 3, contiguous=True)

    async def no_ledger(**_: object) -> None:
        raise NotEnoughBookiesError("a ledger of ensemble size 3 needs 3 bookies, 2 available")
    # Loading the segment again fails (it cannot start a ledger), as in the
    # fault run while the bookie was down.
    monkeypatch.setattr(env.ledgers, "create", no_ledger)
    with pytest.raises(LedgerError) as answered:
        await resolve_failed_append(topics, "t/0", [block(1, 2)], WRITER, 3, failed.value,
                                    timeout_s=0.2)
    assert answered.value is failed.value  # answered as the failure: outcome unknown
