"""BookieDirectory: placement choice, quarantine on an injected clock, and client lookup."""

from __future__ import annotations

from typing import Any

import pytest

from ledger.api import AddRequest, LedgerTail, ReadResult
from ledger.client.directory import BookieDirectory
from ledger.errors import BookieUnavailableError


class Client:
    """A ``BookieClient`` with only what the directory may use: its id and ``close``."""

    def __init__(self, bookie_id: str) -> None:
        self._bookie_id = bookie_id
        self.closes = 0

    @property
    def bookie_id(self) -> str:
        return self._bookie_id

    async def close(self) -> None:
        self.closes += 1

    async def add_entries(self, request: AddRequest) -> None:
        raise AssertionError("the directory must not add")

    async def read_entries(self, ledger_id: int, first_entry_id: int, last_entry_id: int,
                           *, fence: bool = False, max_bytes: int = 0) -> ReadResult:
        raise AssertionError("the directory must not read")

    async def read_last_add_confirmed(self, ledger_id: int) -> LedgerTail:
        raise AssertionError("the directory must not read")

    async def fence(self, ledger_id: int) -> LedgerTail:
        raise AssertionError("the directory must not fence")

    async def delete_ledger(self, ledger_id: int) -> None:
        raise AssertionError("the directory must not delete")


class Clock:
    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def directory_of(*ids: str, **kwargs: Any) -> BookieDirectory:
    return BookieDirectory([Client(bookie_id) for bookie_id in ids], **kwargs)


def test_choose_returns_distinct_available_bookies_outside_exclude() -> None:
    directory = directory_of("a", "b", "c", "d")

    assert sorted(directory.choose(4, exclude={"b"})) == ["a", "c", "d"]
    assert sorted(directory.choose(10)) == ["a", "b", "c", "d"]
    assert directory.choose(0) == []
    assert directory.choose(3, exclude=frozenset({"a", "b", "c", "d"})) == []
    for _ in range(50):
        chosen = directory.choose(2, exclude={"a", "d"})
        assert sorted(chosen) == ["b", "c"]
    for _ in range(50):
        chosen = directory.choose(2, exclude={"c"})
        assert len(chosen) == len(set(chosen)) == 2
        assert set(chosen) <= {"a", "b", "d"}


def test_adding_a_bookie_twice_does_not_repeat_it() -> None:
    directory = directory_of("a")
    directory.add(Client("a"))
    directory.add(Client("b"))
    assert directory.available() == ["a", "b"]


def test_a_failed_bookie_is_quarantined_until_the_period_ends() -> None:
    clock = Clock(0.0)
    directory = directory_of("a", "b", "c", quarantine_ms=5_000, clock=clock)
    assert directory.available() == ["a", "b", "c"]  # even at time 0

    clock.now = 100.0
    directory.mark_failed("b")
    assert directory.available() == ["a", "c"]
    for _ in range(20):  # chosen last: only when the others are not enough
        assert sorted(directory.choose(2)) == ["a", "c"]
        assert sorted(directory.choose(1, exclude={"a"})) == ["c"]
    clock.now = 104.999
    assert directory.available() == ["a", "c"]
    clock.now = 105.0
    assert directory.available() == ["a", "b", "c"]

    directory.mark_failed("b")  # failing again restarts the period
    directory.mark_failed("c")
    clock.now = 109.0
    assert directory.available() == ["a"]
    clock.now = 110.0
    assert directory.available() == ["a", "b", "c"]


def test_quarantined_bookies_make_up_the_count_when_too_few_others_are_left() -> None:
    # As BookKeeper's newEnsemble: E=3 on 3 bookies, one of which failed an add
    # while it restarted, must place ledgers again once it is back.
    clock = Clock(0.0)
    directory = directory_of("a", "b", "c", "d", quarantine_ms=5_000, clock=clock)
    directory.mark_failed("b")
    directory.mark_failed("c")
    for _ in range(20):
        chosen = directory.choose(3)
        assert len(chosen) == 3 and "a" in chosen and "d" in chosen
    assert sorted(directory.choose(3, exclude={"d"})) == ["a", "b", "c"]
    assert directory.choose(1, exclude={"a", "d"}) in (["b"], ["c"])
    directory.set_available(["a", "b"])  # only registered bookies, quarantined or not
    assert sorted(directory.choose(3)) == ["a", "b"]


def test_a_quarantined_bookie_can_still_be_reached() -> None:
    clock = Clock(1.0)
    directory = directory_of("a", quarantine_ms=1_000, clock=clock)
    client = directory.bookie("a")
    directory.mark_failed("a")
    assert directory.available() == []
    assert directory.bookie("a") is client


def test_bookie_returns_the_same_client_every_time() -> None:
    a, b = Client("a"), Client("b")
    directory = BookieDirectory([a, b])
    assert directory.bookie("a") is a
    assert directory.bookie("a") is a
    assert directory.bookie("b") is b


def test_an_unknown_bookie_without_connect_is_unavailable() -> None:
    directory = directory_of("a")
    with pytest.raises(BookieUnavailableError,
                       match="no way to reach bookie remote:3181") as caught:
        directory.bookie("remote:3181")
    assert caught.value.retriable is True


def test_an_unknown_bookie_is_connected_once_and_not_placed_on() -> None:
    connected: list[str] = []

    def connect(bookie_id: str) -> Client:
        connected.append(bookie_id)
        return Client(bookie_id)

    directory = directory_of("a", connect=connect)
    first = directory.bookie("remote:1")
    assert directory.bookie("remote:1") is first
    assert first.bookie_id == "remote:1"
    second = directory.bookie("remote:2")
    assert directory.bookie("remote:2") is second
    assert directory.bookie("a").bookie_id == "a"
    assert connected == ["remote:1", "remote:2"]
    # Clients made on demand are for ledgers already placed, not for new ones.
    assert directory.available() == ["a"]


async def test_close_closes_every_client_once() -> None:
    placed = Client("a")
    made: list[Client] = []

    def connect(bookie_id: str) -> Client:
        made.append(Client(bookie_id))
        return made[-1]

    directory = BookieDirectory([placed], connect=connect)
    directory.bookie("remote:1")
    await directory.close()
    assert (placed.closes, [client.closes for client in made]) == (1, [1])
