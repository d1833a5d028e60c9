"""Writers of a system topic cancelled mid-write leave no "Future exception was never retrieved".

After a crash, clients cut and retry calls while the broker finishes what the
crash interrupted; a cancelled call cancels its ``_txnlog`` write. The group
commit's leader then fails the queued records of its group, and asyncio
logged "Future exception was never retrieved" for each writer that was
cancelled too (issue 13, seen at startup after a crash).
"""

from __future__ import annotations

import asyncio
import gc
import logging

import pytest

from broker.system.compacted_topic import CompactedTopic
from broker.topics.manager import TopicManager


async def test_cancelled_writers_leave_no_unretrieved_exception(
        topics: TopicManager, caplog: pytest.LogCaptureFixture) -> None:
    topic = CompactedTopic(topics, "__folio_cancelled", maintain=False)
    await topic.write("warm-up", b"x")  # the segment is loaded: the next leader appends at once
    caplog.set_level(logging.ERROR, logger="asyncio")
    writers = [asyncio.create_task(topic.write(f"key-{n}", b"v")) for n in range(5)]
    await asyncio.sleep(0)  # every record queued, the first writer leads the group commit
    for writer in writers:
        writer.cancel()
    results = await asyncio.gather(*writers, return_exceptions=True)
    assert all(isinstance(result, asyncio.CancelledError) for result in results), results
    del writers, results
    for _ in range(3):
        gc.collect()
        await asyncio.sleep(0)
    assert "never retrieved" not in caplog.text, caplog.text
    # The topic still takes writes.
    await topic.write("after", b"y")
    assert await topic.get("after") == b"y"


async def test_a_cancelled_leader_does_not_fail_the_others_of_its_group(
        topics: TopicManager) -> None:
    # A cut client cancels its call, and with it the write leading a group
    # commit; the other records of the group (another client's transaction
    # registering a segment, say) are still committed, not failed with it.
    topic = CompactedTopic(topics, "__folio_cancelled_leader", maintain=False)
    await topic.write("warm-up", b"x")
    blocker = asyncio.create_task(topic.write("blocker", b"b"))
    await asyncio.sleep(0)  # the blocker's group commit is under way
    writers = [asyncio.create_task(topic.write(f"key-{n}", b"v%d" % n)) for n in range(5)]
    await blocker  # meanwhile the five queued; the first now leads them as one group
    for _ in range(100):  # bounded: a few loop turns until the leader took the queue
        if not topic._queue:
            break
        await asyncio.sleep(0)
    assert not topic._queue and not any(writer.done() for writer in writers)
    writers[0].cancel()
    results = await asyncio.gather(*writers, return_exceptions=True)
    assert isinstance(results[0], asyncio.CancelledError)
    assert results[1:] == [None] * 4, results
    for n in range(1, 5):
        assert await topic.get(f"key-{n}") == b"v%d" % n
    await topic.write("after", b"y")  # the lock was handed back
    assert await topic.get("after") == b"y"
