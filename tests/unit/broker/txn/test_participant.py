"""TxnParticipant: a segment owner's state machine for transactions coordinated elsewhere.

Registration once per (transaction, segment), closed transactions refuse,
a marker waits for the appends in flight, the register/marker race, and a
coordinator on a real TopicManager taking registrations and routing markers.
"""

from __future__ import annotations

import asyncio

import pytest

from broker.api import TopicConfig
from broker.errors import TxnStateError
from broker.segments.entry import EntryKind
from broker.txn.coordinator import TxnCoordinator, TxnState
from broker.txn.participant import MarkableSegment, TxnParticipant
from tests.support.txn_ids import fixed_txn_id
from tests.support.wait import wait_for_async
from tests.unit.broker.conftest import BrokerEnv, block, read_all
from txnbuffer.api import TxnId

T1 = fixed_txn_id(bytes(range(1, 17)))
T2 = fixed_txn_id(bytes(range(2, 18)))


class _Segment:
    def __init__(self) -> None:
        self.markers: list[tuple[EntryKind, TxnId]] = []

    async def write_marker(self, kind: EntryKind, txn_id: TxnId) -> int:
        self.markers.append((kind, txn_id))
        return 0


class _Coordinator:
    """Records registrations; ``gate`` (if set) holds each one until released."""

    def __init__(self) -> None:
        self.registered: list[tuple[TxnId, str]] = []
        self.gate: asyncio.Event | None = None
        self.refuse: Exception | None = None

    async def register(self, txn_id: TxnId, segment: str) -> None:
        if self.gate is not None:
            await self.gate.wait()
        if self.refuse is not None:
            raise self.refuse
        self.registered.append((txn_id, segment))


class _Clock:
    def __init__(self) -> None:
        self.now_s = 1_000.0

    def __call__(self) -> float:
        return self.now_s


def _participant(coordinator: _Coordinator, segment: _Segment,
                 clock: _Clock | None = None) -> TxnParticipant:
    async def segment_of(_name: str) -> MarkableSegment:
        return segment

    return TxnParticipant(coordinator.register, segment_of, clock=clock or _Clock(),
                          finished_retention_ms=10_000)


async def test_registers_once_per_transaction_and_segment() -> None:
    coordinator, segment = _Coordinator(), _Segment()
    participant = _participant(coordinator, segment)
    for _ in range(3):
        async with participant.writing(T1, "s/0"):
            assert participant.in_flight(T1, "s/0") == 1
    async with participant.writing(T1, "s/1"):
        pass
    async with participant.writing(T2, "s/0"):
        pass
    assert coordinator.registered == [(T1, "s/0"), (T1, "s/1"), (T2, "s/0")]
    assert participant.in_flight(T1, "s/0") == 0


async def test_a_closed_transaction_refuses_later_appends() -> None:
    coordinator, segment = _Coordinator(), _Segment()
    participant = _participant(coordinator, segment)
    async with participant.writing(T1, "s/0"):
        pass
    await participant.write_marker("s/0", T1, EntryKind.COMMIT_MARKER)
    assert segment.markers == [(EntryKind.COMMIT_MARKER, T1)]
    with pytest.raises(TxnStateError) as refused:
        async with participant.writing(T1, "s/0"):
            pytest.fail("an append of a committed transaction ran")
    assert (refused.value.expected, refused.value.actual) == ("OPEN", "COMMITTED")
    # Other segments and transactions are not affected.
    async with participant.writing(T1, "s/1"):
        pass
    async with participant.writing(T2, "s/0"):
        pass


async def test_the_marker_waits_for_appends_in_flight_and_closes_first() -> None:
    coordinator, segment = _Coordinator(), _Segment()
    participant = _participant(coordinator, segment)
    release = asyncio.Event()
    inside = asyncio.Event()

    async def slow_append() -> None:
        async with participant.writing(T1, "s/0"):
            inside.set()
            await release.wait()

    append = asyncio.create_task(slow_append())
    await inside.wait()
    marker = asyncio.create_task(participant.write_marker("s/0", T1, EntryKind.ABORT_MARKER))
    for _ in range(5):
        await asyncio.sleep(0)
    assert segment.markers == [] and not marker.done()
    # Closed already: a new append is refused while the marker waits.
    with pytest.raises(TxnStateError) as refused:
        async with participant.writing(T1, "s/0"):
            pytest.fail("an append landed after the abort was decided")
    assert refused.value.actual == "ABORTING"
    release.set()
    await append
    await marker
    assert segment.markers == [(EntryKind.ABORT_MARKER, T1)]


async def test_a_marker_that_overtakes_the_registration_answer_refuses_the_append() -> None:
    coordinator, segment = _Coordinator(), _Segment()
    coordinator.gate = asyncio.Event()
    participant = _participant(coordinator, segment)
    ran = False

    async def append() -> None:
        nonlocal ran
        async with participant.writing(T1, "s/0"):
            ran = True

    task = asyncio.create_task(append())
    await asyncio.sleep(0)
    # The coordinator logged the segment and decided; its marker arrives first.
    await participant.write_marker("s/0", T1, EntryKind.COMMIT_MARKER)
    coordinator.gate.set()
    with pytest.raises(TxnStateError):
        await task
    assert not ran
    assert segment.markers == [(EntryKind.COMMIT_MARKER, T1)]
    assert participant.in_flight(T1, "s/0") == 0


async def test_a_refused_registration_is_not_remembered() -> None:
    coordinator, segment = _Coordinator(), _Segment()
    participant = _participant(coordinator, segment)
    coordinator.refuse = TxnStateError("t", "OPEN", "COMMITTING")
    with pytest.raises(TxnStateError):
        async with participant.writing(T1, "s/0"):
            pytest.fail("an append ran without its registration")
    coordinator.refuse = None
    async with participant.writing(T1, "s/0"):
        pass
    assert coordinator.registered == [(T1, "s/0")]


async def test_a_segment_loaded_again_registers_again() -> None:
    coordinator, segment = _Coordinator(), _Segment()
    participant = _participant(coordinator, segment)
    first, second = object(), object()
    async with participant.writing(T1, "s/0", first):
        pass
    async with participant.writing(T1, "s/0", first):
        pass
    async with participant.writing(T1, "s/0", second):  # the segment moved and came back
        pass
    assert coordinator.registered == [(T1, "s/0"), (T1, "s/0")]


async def test_closed_transactions_are_forgotten_after_the_retention() -> None:
    coordinator, segment, clock = _Coordinator(), _Segment(), _Clock()
    participant = _participant(coordinator, segment, clock)
    await participant.write_marker("s/0", T1, EntryKind.ABORT_MARKER)
    clock.now_s += 11
    await participant.write_marker("s/1", T2, EntryKind.ABORT_MARKER)  # forgets what is old
    # Forgotten here: the coordinator is asked again (and refuses a finished one).
    coordinator.refuse = TxnStateError("t", "OPEN", "ABORTED")
    with pytest.raises(TxnStateError) as refused:
        async with participant.writing(T1, "s/0"):
            pass
    assert refused.value is coordinator.refuse
    with pytest.raises(TxnStateError) as still:
        async with participant.writing(T2, "s/1"):
            pass
    assert still.value.actual == "ABORTED" and still.value is not coordinator.refuse


async def test_coordinator_registers_for_owners_and_routes_its_markers(env: BrokerEnv) -> None:
    """The coordinator's side: register_segment logs, markers go through the route."""
    topics = env.manager()
    await topics.create_topic("t", 2, TopicConfig())
    coordinator = TxnCoordinator(topics, clock=env.clock)
    await coordinator.start()

    async def load(name: str) -> MarkableSegment:
        return await topics.segment(name)

    participant = TxnParticipant(coordinator.register_segment, load, clock=env.clock)
    routed: list[tuple[str, EntryKind]] = []

    async def route(name: str, txn_id: TxnId, kind: EntryKind) -> None:
        routed.append((name, kind))
        await participant.write_marker(name, txn_id, kind)

    coordinator.route_markers(route)
    txn = await coordinator.begin(60_000)
    for number in (0, 1):
        segment = await topics.segment(f"t/{number}")
        async with participant.writing(txn, f"t/{number}", segment):
            await segment.append([block(number)], "", -1, txn_id=txn)
    assert coordinator.status(txn).segments == ("t/0", "t/1")
    await coordinator.commit([txn])
    assert sorted(routed) == [("t/0", EntryKind.COMMIT_MARKER),
                              ("t/1", EntryKind.COMMIT_MARKER)]
    assert coordinator.status(txn).state is TxnState.COMMITTED
    for number in (0, 1):
        assert len(await read_all(await topics.segment(f"t/{number}"), 0)) == 1
    with pytest.raises(TxnStateError):
        await coordinator.register_segment(txn, "t/0")
    await coordinator.close()


async def test_nothing_is_kept_for_refused_or_finished_appends() -> None:
    coordinator, segment = _Coordinator(), _Segment()
    participant = _participant(coordinator, segment)
    coordinator.refuse = TxnStateError("t", "OPEN", "ABORTED")
    for _ in range(3):
        with pytest.raises(TxnStateError):
            async with participant.writing(T1, "s/0"):
                pass
    coordinator.refuse = None
    async with participant.writing(T2, "s/0"):
        pass
    await participant.write_marker("s/0", T2, EntryKind.COMMIT_MARKER)
    assert participant.tracked() == 0


async def test_a_cluster_take_over_serves_before_the_markers_of_decided_ones_land(
        env: BrokerEnv) -> None:
    """Replay with routed markers: decided transactions finish in the background."""
    topics = env.manager()
    await topics.create_topic("t", 1, TopicConfig())
    released = asyncio.Event()
    routed: list[str] = []

    async def blocked_route(name: str, txn_id: TxnId, kind: EntryKind) -> None:
        routed.append(name)
        await released.wait()  # the owner cannot be reached yet
        await (await topics.segment(name)).write_marker(kind, txn_id)

    first = TxnCoordinator(topics, clock=env.clock)
    first.route_markers(blocked_route)
    await first.start()
    txn = await first.begin(60_000)
    await first.register_segment(txn, "t/0")
    committing = asyncio.create_task(first.commit([txn]))

    async def marker_asked() -> bool:  # COMMITTING is logged once the marker is asked for
        return bool(routed)

    await wait_for_async(marker_asked, "the commit asks for its marker")
    successor = TxnCoordinator(topics, clock=env.clock)
    successor.route_markers(blocked_route)
    await successor.start()  # returns with the marker still pending
    assert successor.status(txn).state is TxnState.COMMITTING
    released.set()
    await committing
    await successor.close()  # waits for its background finishing
    assert successor.status(txn).state is TxnState.COMMITTED
