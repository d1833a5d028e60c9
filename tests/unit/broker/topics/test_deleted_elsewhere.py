"""A segment deleted through one broker while another still has it loaded (issue 22).

The other broker's copy goes only when its record watch fires. Until then an
append through it reaches the deleted ledger's bookies, which refuse it (a
deleted ledger is fenced for ever, ``ledger.bookie.tombstones``): the append
fails with ``NoSuchSegmentError`` and is never acknowledged, and the deleted
ledger is not re-created on the bookie. The watch is held back by a wrapper
at the metadata seam, so the window is deterministic.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from broker.errors import NoSuchSegmentError
from broker.system.snapshot_store import snapshot_store
from broker.topics.manager import TopicManager
from ledger.api import EventType, MetadataStore, Versioned, WatchCallback
from tests.support.faulty_metadata import FaultyMetadataStore
from tests.support.wait import wait_for_async
from tests.unit.broker.conftest import SMALL, BrokerEnv, block

pytestmark = pytest.mark.faults


class HeldWatches(FaultyMetadataStore):
    """The store, with every record watch held until ``release`` (a watch that fires late)."""

    def __init__(self, store: MetadataStore) -> None:
        super().__init__(store)
        self.held: list[Callable[[], None]] = []

    async def get(self, path: str, *, watch: WatchCallback | None = None) -> Versioned:
        if watch is None:
            return await super().get(path)
        callback = watch

        def late(event: EventType, fired: str) -> None:
            self.held.append(lambda: callback(event, fired))
        return await super().get(path, watch=late)

    def release(self) -> None:
        held, self.held = self.held, []
        for fire in held:
            fire()


async def test_an_append_through_a_stale_copy_of_a_deleted_segment_is_refused(
        env: BrokerEnv) -> None:
    deleter = env.manager(reload_fenced=True)
    watches = HeldWatches(env.store)
    stale_broker = TopicManager(env.ledgers, watches, txn_store_factory=snapshot_store,
                                clock=env.clock, reload_fenced=True)
    try:
        await deleter.create_topic("t", 1, SMALL)
        stale = await stale_broker.segment("t/0")
        assert (await stale.append([block(0)], "w", 0)).offset == 0
        held_before = set(env.bookie.ledger_ids())

        await deleter.delete_topic("t")
        deleted = held_before - set(env.bookie.ledger_ids())
        assert deleted, "the segment's ledger is deleted from the bookie"

        # The stale copy still takes the call (its watch has not fired): the
        # bookie refuses the add, the append is not acknowledged.
        for number in (1, 2):
            with pytest.raises(NoSuchSegmentError):
                await stale.append([block(number)], "w", number)
        assert not deleted & set(env.bookie.ledger_ids()), "no deleted ledger re-created"

        watches.release()

        async def forgotten() -> bool:
            try:
                await stale_broker.segment("t/0")
            except NoSuchSegmentError:
                return True
            return False
        await wait_for_async(forgotten, "the stale broker finds the segment gone")
        assert not deleted & set(env.bookie.ledger_ids())
    finally:
        await stale_broker.close()
