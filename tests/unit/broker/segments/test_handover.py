"""A segment leaving this broker: a graceful hand-over, an abandon (session lost), a reload."""

from __future__ import annotations

import pytest

from broker.api import SegmentState
from broker.errors import WrongHostError
from broker.topics.manager import TopicManager
from tests.unit.broker.conftest import SMALL, BrokerEnv, block


async def test_hand_over_finishes_appends_closes_the_ledger_and_refuses_the_rest(
        topics: TopicManager) -> None:
    await topics.create_topic("t", 1, SMALL)
    segment = await topics.segment("t/0")
    await segment.append([block(0, 3)], "w", 2)
    await topics.release_segments(lambda name: name == "t/0")
    with pytest.raises(WrongHostError):
        await segment.append([block(1, 1)], "w", 3)
    with pytest.raises(WrongHostError):
        await segment.read(0, 100)
    # The next load (here: this broker again, as a new owner would) finds the
    # ledger closed and the writer table: the resend of event 2 is a duplicate.
    again = await topics.segment("t/0")
    assert again is not segment
    assert again.info().ledgers[0].closed
    duplicate = await again.append([block(0, 3)], "w", 2)
    assert duplicate.duplicate
    result = await again.append([block(1, 1)], "w", 3)
    assert (result.offset, result.duplicate) == (3, False)
    assert again.info().segment.state is SegmentState.OPEN


async def test_abandon_refuses_at_once_and_the_next_owner_fences(
        topics: TopicManager) -> None:
    await topics.create_topic("t", 1, SMALL)
    segment = await topics.segment("t/0")
    await segment.append([block(0, 2)], "w", 1)
    topics.drop_segments(lambda name: name == "t/0")
    with pytest.raises(WrongHostError):
        await segment.append([block(1, 1)], "w", 2)
    # A new owner's load recovers (fences) the open ledger: everything acknowledged is there.
    again = await topics.segment("t/0")
    assert again.info().segment.end_offset == 2
    assert (await again.append([block(1, 1)], "w", 2)).offset == 2


async def test_a_taken_over_segment_s_empty_ledger_refuses_the_old_owner(
        env: BrokerEnv) -> None:
    """Two cluster brokers (two managers on one stack): B takes a segment A loaded, never wrote.

    Recovery sets A's empty ledger aside. Deleting it would drop its fence on the
    bookies (they would then take A's late append into a ledger nobody reads);
    a cluster keeps it, fenced, and A's append is refused.
    """
    first = env.manager(reload_fenced=True)
    await first.create_topic("t", 1, SMALL)
    stale = await first.segment("t/0")  # loaded: a fresh, empty ledger
    second = env.manager(reload_fenced=True)
    taken = await second.segment("t/0")  # recovery fences that ledger, sets it aside
    with pytest.raises(WrongHostError):
        await stale.append([block(0, 1)], "w", 0)
    assert taken.info().segment.end_offset == 0
    assert (await taken.append([block(0, 1)], "w", 0)).offset == 0
