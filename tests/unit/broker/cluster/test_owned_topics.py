"""OwnedTopics (the services' view of a cluster broker's topics) and TopicsHandover."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from broker.cluster.containers import container_of
from broker.cluster.owned_topics import OwnedTopics, TopicsHandover
from broker.errors import WrongHostError


class FakeTopics:
    """The few TopicManager calls OwnedTopics and TopicsHandover make."""

    def __init__(self, on_load: Callable[[], None] = lambda: None) -> None:
        self.loaded = ["orders/0", "orders/1", "_txnlog/0"]
        self.released: list[str] = []
        self.dropped: list[str] = []
        self._on_load = on_load

    async def segment(self, name: str) -> str:
        self._on_load()
        return f"segment {name}"

    async def writable_segment(self, name: str, action: str) -> str:
        return await self.segment(name)

    async def release_segments(self, moving: Callable[[str], bool]) -> None:
        self.released += [name for name in self.loaded if moving(name)]

    def drop_segments(self, moving: Callable[[str], bool]) -> None:
        self.dropped += [name for name in self.loaded if moving(name)]


def owned(topics: Any, owned_names: set[str]) -> OwnedTopics:
    return OwnedTopics(topics, lambda name: name in owned_names,
                       lambda name: "10.0.0.2:7070")


async def test_a_segment_it_does_not_own_is_wrong_host_with_the_owner() -> None:
    view = owned(FakeTopics(), {"orders/0"})
    assert await view.segment("orders/0") == "segment orders/0"
    with pytest.raises(WrongHostError) as caught:
        await view.writable_segment("orders/1", "Produce")
    assert caught.value.context() == {"segment": "orders/1", "owner": "10.0.0.2:7070"}


async def test_a_container_released_during_the_load_hands_the_segment_over() -> None:
    names = {"orders/0"}
    topics = FakeTopics(on_load=names.clear)  # released while loading
    view = owned(topics, names)
    with pytest.raises(WrongHostError):
        await view.segment("orders/0")
    assert topics.released == ["orders/0"]


async def test_handover_moves_user_segments_of_the_containers_only() -> None:
    topics = FakeTopics()
    handover = TopicsHandover(topics, 16)  # type: ignore[arg-type]
    containers = frozenset({container_of("orders/0", 16), container_of("_txnlog/0", 16)})
    await handover.release(containers)
    handover.drop(containers)
    expected = [n for n in ("orders/0", "orders/1")
                if container_of(n, 16) in containers]
    assert topics.released == expected and topics.dropped == expected
