"""A full transaction's core (folio.txn._full_core): what a commit waits for.

No IO: the flows' submissions are recorded, not run, and the test settles
the batches' futures as the flows would.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import pytest

from folio.errors import FolioUnavailableError, InvalidArgumentError, TxnStateError
from folio.models import SegmentRange, TopicConfig, TopicInfo
from folio.txn._full_core import Local, TxnCore, TxnShared, check_txn_timeout_ms
from folio.txn._full_routes import TopicRoutes

TOPIC = TopicInfo("t", TopicConfig(-1, -1, 1024, 1 << 20, 60_000),
                  (SegmentRange("t/0", 0, 0.0, 0.5, False, 0, 0),
                   SegmentRange("t/1", 1, 0.5, 1.0, False, 0, 0)), 0)


class _Io:
    """Records what would run on the loop."""

    def __init__(self) -> None:
        self.calls: list[tuple[Callable[..., object], tuple[object, ...]]] = []

    def call_soon(self, callback: Callable[..., object], *args: object) -> None:
        self.calls.append((callback, args))


def _core(forgotten: list[TxnCore] | None = None) -> tuple[TxnCore, _Io]:
    io = _Io()
    shared = TxnShared(topic="t", routes=TopicRoutes(TOPIC), serialize=bytes, raw=True,
                       max_event_bytes=1024, io=cast(Any, io), source=cast(Any, None),
                       give_up_s=60, forget=(forgotten if forgotten is not None else []).append)
    return TxnCore(shared, b"x" * 16), io


def test_a_send_also_returns_the_batches_of_earlier_sends_not_yet_written() -> None:
    core, io = _core()
    core.write_event(b"a", None, None)
    first = core.send()  # a flush whose wait ended first: its batch is on its way
    assert len(first) == 1 and len(io.calls) == 1
    core.write_event(b"b", None, None)  # the other segment (keyless rotation)
    second = core.send(only_if_open=True)  # the commit waits for both
    assert second[0] is first[0] and len(second) == 2
    first[0].set_result(None)
    assert core.send() == [second[1]]  # a written batch is no longer waited for
    failed = second[1]
    failed.set_exception(FolioUnavailableError("down"))
    assert core.send() == [failed]  # a failed one still is: its failure is seen


def test_a_core_ended_releases_its_flows_and_is_forgotten() -> None:
    forgotten: list[TxnCore] = []
    core, io = _core(forgotten)
    core.write_event(b"a", "k", {"h": b"v"})
    core.send()
    core.end(Local.ABORTED)
    assert core.state is Local.ABORTED and forgotten == [core]
    assert [callback.__name__ for callback, _ in io.calls] == ["submit", "release"]
    with pytest.raises(TxnStateError) as refused:
        core.write_event(b"late", None, None)
    assert refused.value.actual == "ABORTED"
    assert core.send(only_if_open=True) == []


@pytest.mark.parametrize("bad", [0, -1, 86_400_001])
def test_a_txn_timeout_out_of_range_is_refused(bad: int) -> None:
    with pytest.raises(InvalidArgumentError, match="txn_timeout_ms"):
        check_txn_timeout_ms(bad)
