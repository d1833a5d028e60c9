"""A segment leaving this broker: a graceful hand-over, an abandon (session lost), a reload."""

from __future__ import annotations

import pytest

from broker.api import SegmentState
from broker.errors import WrongHostError
from broker.topics.manager import TopicManager
from tests.unit.broker.conftest import SMALL, block


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
