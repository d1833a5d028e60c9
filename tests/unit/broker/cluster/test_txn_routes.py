"""ClusterTxnRoutes: registrations and markers routed to where the coordinator and segments are.

In process when this broker holds them (no RPC), else to the peer the owner
cache names, following WrongHost and retrying until the marker lands; the
retries end when the coordinator's container leaves or the broker stops.
"""

from __future__ import annotations

import asyncio

import pytest

from broker.cluster.containers import COORDINATOR_SEGMENT
from broker.cluster.txn_routes import ClusterTxnRoutes
from broker.errors import BrokerShuttingDownError, NoSuchSegmentError, WrongHostError
from broker.segments.entry import EntryKind
from tests.support.txn_ids import fixed_txn_id
from tests.support.wait import wait_for_async
from txnbuffer.api import TxnId

T = fixed_txn_id(bytes(range(1, 17)))
SELF = "self:1"


class _Owners:
    def __init__(self, owners: dict[str, str]) -> None:
        self.map = owners
        self.lookups = 0

    def owns(self, segment: str) -> bool:
        return self.map.get(segment) == SELF

    def owner_of(self, segment: str) -> str:
        self.lookups += 1
        return self.map.get(segment, "")

    async def looked_up_again(self, since: int) -> bool:
        """Whether a retry looked an owner up after ``since`` lookups."""
        return self.lookups > since + 1


class _Peers:
    """Scripted answers per (call, address): an exception to raise, or None (done)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str]] = []
        self.answers: dict[tuple[str, str], list[Exception | None]] = {}

    def _answer(self, call: str, address: str, segment: str) -> None:
        self.calls.append((call, address, segment))
        queue = self.answers.get((call, address), [])
        answer = queue.pop(0) if queue else None
        if answer is not None:
            raise answer

    async def register_txn_segment(self, address: str, txn_id: TxnId, segment: str) -> None:
        self._answer("register", address, segment)

    async def write_txn_marker(self, address: str, segment: str, txn_id: TxnId,
                               commit: bool) -> None:
        self._answer("marker", address, segment)


class _Segment:
    def __init__(self) -> None:
        self.markers: list[EntryKind] = []

    async def write_marker(self, kind: EntryKind, txn_id: TxnId) -> int:
        self.markers.append(kind)
        return 0


def _routes(owners: _Owners, peers: _Peers, *, here: bool = True,
            segment: _Segment | None = None,
            register_timeout_s: float = 30.0) -> tuple[ClusterTxnRoutes, list[str]]:
    registered: list[str] = []

    async def register_here(txn_id: TxnId, name: str) -> None:
        registered.append(name)

    async def load(name: str) -> _Segment:
        return segment or _Segment()

    routes = ClusterTxnRoutes(owners, peers, lambda: here, register_here,  # type: ignore[arg-type]
                              load, register_timeout_s=register_timeout_s)
    return routes, registered


async def test_registration_is_in_process_here_and_an_rpc_elsewhere() -> None:
    owners = _Owners({COORDINATOR_SEGMENT: SELF})
    peers = _Peers()
    routes, registered = _routes(owners, peers, here=True)
    await routes.register(T, "a/0")
    assert registered == ["a/0"] and peers.calls == []
    owners.map[COORDINATOR_SEGMENT] = "coord:2"
    routes, registered = _routes(owners, peers, here=False)
    peers.answers[("register", "coord:2")] = [WrongHostError(COORDINATOR_SEGMENT, "")]
    await routes.register(T, "a/0")  # retried after the WrongHost
    assert registered == [] and peers.calls == [("register", "coord:2", "a/0")] * 2


async def test_markers_local_remote_and_following_wrong_host() -> None:
    owners = _Owners({COORDINATOR_SEGMENT: SELF, "a/0": SELF, "b/0": "old:2"})
    peers = _Peers()
    segment = _Segment()
    routes, _ = _routes(owners, peers, segment=segment)
    await routes.write_marker("a/0", T, EntryKind.COMMIT_MARKER)
    assert segment.markers == [EntryKind.COMMIT_MARKER] and peers.calls == []
    peers.answers[("marker", "old:2")] = [WrongHostError("b/0", "new:3")]
    peers.answers[("marker", "new:3")] = [BrokerShuttingDownError("cut")]
    await routes.write_marker("b/0", T, EntryKind.ABORT_MARKER)
    assert peers.calls == [("marker", "old:2", "b/0"), ("marker", "new:3", "b/0"),
                           ("marker", "old:2", "b/0")]
    # A deleted segment needs no marker.
    peers.answers[("marker", "old:2")] = [NoSuchSegmentError("b/0")]
    await routes.write_marker("b/0", T, EntryKind.ABORT_MARKER)


async def test_marker_retries_end_when_the_coordinator_moves_or_the_broker_stops() -> None:
    owners = _Owners({COORDINATOR_SEGMENT: SELF})  # b/0: no owner known yet
    routes, _ = _routes(owners, _Peers())
    writing = asyncio.create_task(routes.write_marker("b/0", T, EntryKind.COMMIT_MARKER))
    await wait_for_async(lambda: owners.looked_up_again(0), "the marker retried")
    assert not writing.done()
    owners.map[COORDINATOR_SEGMENT] = "next:4"
    with pytest.raises(WrongHostError) as moved:
        await writing
    assert (moved.value.segment, moved.value.owner) == (COORDINATOR_SEGMENT, "next:4")
    owners.map[COORDINATOR_SEGMENT] = SELF
    writing = asyncio.create_task(routes.write_marker("b/0", T, EntryKind.COMMIT_MARKER))
    since = owners.lookups
    await wait_for_async(lambda: owners.looked_up_again(since), "the marker retried")
    routes.stop()
    with pytest.raises(BrokerShuttingDownError):
        await writing
    with pytest.raises(BrokerShuttingDownError):
        await routes.register(T, "b/0")


async def test_a_coordinator_that_never_answers_refuses_the_append_as_unavailable() -> None:
    owners = _Owners({COORDINATOR_SEGMENT: "coord:2"})
    peers = _Peers()
    peers.answers[("register", "coord:2")] = [BrokerShuttingDownError("down")] * 100
    routes, _ = _routes(owners, peers, here=False, register_timeout_s=0.3)
    with pytest.raises(BrokerShuttingDownError, match="did not take segment 'a/0'"):
        await routes.register(T, "a/0")
    assert len(peers.calls) >= 2  # retried before giving up
