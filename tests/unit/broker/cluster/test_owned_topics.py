"""OwnedTopics (the services' view of a cluster broker's topics) and TopicsHandover."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from broker.cluster.containers import container_of
from broker.cluster.owned_topics import OwnedTopics, TopicsHandover
from broker.cluster.session_gate import SessionGate
from broker.errors import WrongHostError
from ledger.errors import MetadataUnavailableError


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
    found: object = await view.segment("orders/0")  # FakeTopics answers a string
    assert found == "segment orders/0"
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


class FakeSegment:
    """A loaded segment: counts appends and truncations."""

    name = "orders/0"
    config = None
    committed_end = 7

    def __init__(self) -> None:
        self.appends = 0
        self.truncations = 0

    async def append(self, blocks: Any, writer_id: str, last_event_number: int, *,
                     txn_id: Any = None, contiguous: bool = False) -> str:
        self.appends += 1
        return "appended"

    async def truncate(self, offset: int) -> str:
        self.truncations += 1
        return "truncated"

    def info(self) -> str:
        return "info"


class SegmentTopics(FakeTopics):
    def __init__(self) -> None:
        super().__init__()
        self.loaded_segment = FakeSegment()
        self.scaled = 0

    async def writable_segment(self, name: str, action: str) -> Any:
        return self.loaded_segment

    async def scale_topic(self, topic: str, seal: Any, new_ranges: Any) -> str:
        self.scaled += 1
        return "scaled"


async def test_paused_writes_are_refused_and_resume_on_the_same_handle() -> None:
    paused = {"now": False}

    def check_writable(segment: str) -> None:
        if paused["now"]:
            raise SessionGate("b1:7070").refusal(segment)

    topics = SegmentTopics()
    view = OwnedTopics(topics, lambda name: True, lambda name: "b1:7070",  # type: ignore[arg-type]
                       check_writable)
    # Any: a handle on SegmentTopics' fake segment, whose calls answer strings.
    handle: Any = await view.writable_segment("orders/0", "Append")  # bound before the pause
    assert await handle.append([], "w", 0) == "appended"
    paused["now"] = True
    # A stream bound before: its next block is refused; a new setup too.
    with pytest.raises(WrongHostError, match="b1:7070 lost its metadata-store") as caught:
        await handle.append([], "w", 1)
    assert caught.value.context() == {"segment": "orders/0", "owner": ""}
    with pytest.raises(WrongHostError):
        await handle.truncate(3)
    with pytest.raises(WrongHostError):
        await view.writable_segment("orders/0", "Produce")
    with pytest.raises(MetadataUnavailableError, match="b1:7070 lost its metadata-store"):
        await view.scale_topic("orders", ["orders/0"], [(0.0, 0.5), (0.5, 1.0)])
    # Reads are not gated.
    assert handle.info() == "info" and handle.committed_end == 7
    assert topics.loaded_segment.appends == 1 and topics.loaded_segment.truncations == 0
    assert topics.scaled == 0 and topics.released == [] and topics.dropped == []
    paused["now"] = False  # reconnected within the session: the same handle goes on
    assert await handle.append([], "w", 1) == "appended"
    assert await handle.truncate(3) == "truncated"
