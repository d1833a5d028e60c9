"""A failed idempotent append whose segment moves while its outcome is asked: the truth only.

Issue 22 (items 1 and 8): the nemesis (seed 5) found one Kafka record stored
twice. A batch's add failed (a bookie killed) but reached the other bookie.
While the broker asked the reloaded segment whether the batch was stored
(``resolve_failed_append``), its ZooKeeper connection was lost: writes paused,
then its containers were given up, so the segment could not be loaded here
(WrongHost), and the batch was answered NOT_LEADER_OR_FOLLOWER, which
librdkafka takes as "not written". Another partition's OUT_OF_ORDER_SEQUENCE
bumped the producer's epoch before the resend, the resend was numbered anew,
and the segment stored the records a second time.

Here the segment's ownership is the seam (``OwnedTopics`` with an ``owns``
the test turns off), the add fails at the ledger handle's seam after the
bookie stored it, and a second ``TopicManager`` on the same metadata store and
bookie is the new owner. The answer must be the truth, read from the stored
state once the failed ledger is closed; while it is not, the question waits.
"""

from __future__ import annotations

import asyncio
import logging

import pytest
from kio.schema.errors import ErrorCode

from broker.api import TopicConfig
from broker.cluster.owned_topics import OwnedTopics
from broker.errors import WrongHostError
from broker.kafka.sequences import handed_to_ledger, resolve_failed_append
from broker.topics.manager import TopicManager
from ledger.errors import LedgerError, LedgerFencedError, NotEnoughBookiesError
from tests.support.wait import wait_for_async
from tests.unit.broker.conftest import BrokerEnv, block, read_all
from tests.unit.broker.kafka.test_failed_appends import _fail_next_add

pytestmark = pytest.mark.faults

WRITER = "kafka:7:0"
ASKING_AGAIN = "is not closed yet; asking again"


class _Ownership:
    """Whether the old broker owns the segment (the seam the test turns)."""

    def __init__(self) -> None:
        self.owned = True

    def owns(self, _name: str) -> bool:
        return self.owned


async def _failed_append(env: BrokerEnv, *, stored: bool,
                         ) -> tuple[OwnedTopics, _Ownership, LedgerError, int]:
    """The old owner: batch 0-1 written, batch 2-3 failed (its entry stored if ``stored``).

    Returns the old owner's topics, its ownership, the append's error and
    the ledger the append was handed to.
    """
    ownership = _Ownership()
    manager = env.manager(reload_fenced=True)
    old = OwnedTopics(manager, ownership.owns, lambda _name: "127.0.0.1:2")
    await old.create_topic("t", 1, TopicConfig())
    gated = await old.writable_segment("t/0", "Kafka Produce")
    assert (await gated.append([block(0, 2)], WRITER, 1, contiguous=True)).offset == 0
    held = _fail_next_add(await manager.segment("t/0"), stored=stored)
    with pytest.raises(NotEnoughBookiesError) as failed:
        await gated.append([block(1, 2)], WRITER, 3, contiguous=True)  # sequences 2-3
    assert held == ([1] if stored else [])
    assert handed_to_ledger(failed.value)
    return old, ownership, failed.value, gated.info().ledgers[-1].ledger_id


def _resolving(old: OwnedTopics, error: LedgerError, ledger_id: int | None,
               timeout_s: float = 30.0) -> asyncio.Task[tuple[ErrorCode, int, str | None]]:
    return asyncio.ensure_future(resolve_failed_append(
        old, "t/0", [block(1, 2)], WRITER, 3, error, failed_ledger_id=ledger_id,
        timeout_s=timeout_s))


async def test_a_stored_batch_whose_segment_moved_is_answered_written_at_its_offset(
        env: BrokerEnv, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="broker.kafka.sequences")
    old, ownership, error, ledger_id = await _failed_append(env, stored=True)
    ownership.owned = False  # its container given up (ZooKeeper session lost)
    answer = _resolving(old, error, ledger_id)
    # Nobody has loaded the segment since: the failed ledger is open, what it
    # holds is not decided. The old code answered NOT_LEADER_OR_FOLLOWER here.
    async def asking_again() -> bool:
        return ASKING_AGAIN in caplog.text

    await wait_for_async(asking_again, "the failed append asked about again", timeout_s=20)
    assert not answer.done()
    new: TopicManager = env.manager()
    loaded = await new.segment("t/0")  # the new owner's recovery closes the ledger
    assert loaded.end_offset == 4  # it holds the failed batch
    assert await answer == (ErrorCode.none, 2, None)  # written, at its offset
    # The producer's next batch goes to the new owner: it follows on.
    assert (await loaded.append([block(2)], WRITER, 4, contiguous=True)).offset == 4
    assert [b.offset for b in await read_all(loaded, 0)] == [0, 2, 4]


async def test_a_batch_not_stored_whose_segment_moved_is_answered_not_written(
        env: BrokerEnv) -> None:
    old, ownership, error, ledger_id = await _failed_append(env, stored=False)
    ownership.owned = False
    new = env.manager()
    loaded = await new.segment("t/0")
    assert loaded.end_offset == 2
    code, offset, message = await _resolving(old, error, ledger_id)
    # True for good: the failed ledger is closed without it. The producer
    # refreshes its metadata and sends it to the new owner, once.
    assert (code, offset) == (ErrorCode.not_leader_or_follower, -1)
    assert message is not None and "not written to t/0" in message
    assert (await loaded.append([block(1, 2)], WRITER, 3, contiguous=True)).offset == 2
    assert [b.offset for b in await read_all(loaded, 0)] == [0, 2]


async def test_the_new_owner_past_the_failed_ledger_answers_from_its_snapshot(
        env: BrokerEnv) -> None:
    old, ownership, error, ledger_id = await _failed_append(env, stored=True)
    ownership.owned = False
    new = env.manager()
    loaded = await new.segment("t/0")
    # Another producer's batch: the new owner starts a ledger of its own
    # (its record's writer snapshot covers the failed ledger).
    assert (await loaded.append([block(5)], "kafka:8:0", 0, contiguous=True)).offset == 4
    assert loaded.info().ledgers[-1].ledger_id != ledger_id
    assert await _resolving(old, error, ledger_id) == (ErrorCode.none, 2, None)


async def test_an_outcome_never_decided_is_answered_as_the_failure_at_the_deadline(
        env: BrokerEnv) -> None:
    old, ownership, error, ledger_id = await _failed_append(env, stored=True)
    ownership.owned = False  # and nobody loads the segment
    with pytest.raises(LedgerError) as answered:
        await _resolving(old, error, ledger_id, timeout_s=0.5)
    # The failure as it was (REQUEST_TIMED_OUT: possibly written), never a
    # "not written" code.
    assert answered.value is error


def test_only_appends_that_may_have_reached_the_ledger_are_resolved() -> None:
    fenced = WrongHostError("t/0")
    fenced.__cause__ = LedgerFencedError("fenced (injected)")
    assert handed_to_ledger(fenced)
    assert handed_to_ledger(NotEnoughBookiesError("no bookie left (injected)"))
    # Moved or paused before the entry was handed over: that answer is the truth.
    assert not handed_to_ledger(WrongHostError("t/0"))
