"""``SegmentWarmup``: a claimed container's open segments load before any client asks."""

from __future__ import annotations

import asyncio

from broker.cluster.containers import container_of
from broker.cluster.warmup import SegmentWarmup
from broker.errors import NoSuchSegmentError
from tests.support.wait import wait_for_async

COUNT = 4


class FakeTopics:
    """Open segments by name; records each load and listing; some loads fail."""

    def __init__(self, names: list[str], failing: frozenset[str] = frozenset()) -> None:
        self.names = names
        self.failing = failing
        self.listings = 0
        self.loads: list[str] = []

    async def open_segment_names(self) -> list[str]:
        self.listings += 1
        return list(self.names)

    async def writable_segment(self, name: str, action: str) -> object:
        assert action == "warm-up"
        self.loads.append(name)
        if name in self.failing:
            raise NoSuchSegmentError(name)
        return object()


def _names_in(container: int, how_many: int) -> list[str]:
    found = [f"t/{n}" for n in range(1000) if container_of(f"t/{n}", COUNT) == container]
    return found[:how_many]


async def test_the_claims_of_one_step_load_their_containers_segments() -> None:
    one, two, three = _names_in(1, 3), _names_in(2, 2), _names_in(3, 2)
    topics = FakeTopics(one + two + three, failing=frozenset({two[0]}))
    served = {1, 2}
    warmup = SegmentWarmup(topics, COUNT, served.__contains__, concurrency=2)
    try:
        await warmup.claimed(1)
        await warmup.claimed(2)

        async def loaded() -> bool:
            return sorted(topics.loads) == sorted(one + two)

        await wait_for_async(loaded, "the segments of containers 1 and 2 loaded")
        assert topics.listings == 1  # one listing for the step's claims
        assert warmup.loaded == len(one) + len(two) - 1  # the failed load is left to clients
        assert not set(topics.loads) & set(three)  # container 3 is not ours
    finally:
        await warmup.close()


async def test_a_released_container_loads_nothing_more() -> None:
    names = _names_in(1, 2)
    topics = FakeTopics(names)
    served = {1}
    warmup = SegmentWarmup(topics, COUNT, served.__contains__)
    try:
        await warmup.claimed(1)
        served.clear()  # released before the listing ran
        warmup.released(frozenset({1}))
        for _ in range(20):  # loop turns: the listing (if any) has run
            await asyncio.sleep(0)
        assert topics.loads == []
    finally:
        await warmup.close()
