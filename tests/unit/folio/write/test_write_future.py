"""Write futures: one shared outcome per block, results per index, callbacks."""

from __future__ import annotations

import threading

import pytest

from folio.errors import SegmentSealedError, TimeoutError
from folio.models import WriteResult
from folio.write._write_future import BlockOutcome, WriteFuture


def test_result_is_the_block_offset_plus_the_index() -> None:
    outcome = BlockOutcome("t/0")
    futures = [WriteFuture(outcome, i) for i in range(3)]
    assert not any(f.done() for f in futures)
    outcome.set_result(10)
    assert all(f.done() for f in futures)
    assert [f.result() for f in futures] == [WriteResult("t/0", 10 + i) for i in range(3)]
    assert futures[0].exception() is None


def test_duplicate_blocks_give_offset_minus_one() -> None:
    outcome = BlockOutcome("t/0")
    outcome.set_result(-1)
    assert WriteFuture(outcome, 5).result() == WriteResult("t/0", -1)


def test_errors_are_raised_by_every_future() -> None:
    outcome = BlockOutcome("t/1")
    error = SegmentSealedError("sealed")
    outcome.set_error(error)
    for index in range(2):
        future = WriteFuture(outcome, index)
        with pytest.raises(SegmentSealedError):
            future.result(timeout=0)
        assert future.exception(timeout=0) is error


def test_timeouts() -> None:
    future = WriteFuture(BlockOutcome("t/0"), 0)
    with pytest.raises(TimeoutError):
        future.result(timeout=0.01)
    with pytest.raises(TimeoutError):
        future.exception(timeout=0.01)
    assert "pending" in repr(future)


def test_callbacks_run_once_done_or_at_once() -> None:
    outcome = BlockOutcome("t/0")
    seen: list[tuple[int, threading.Thread]] = []
    first, second = WriteFuture(outcome, 0), WriteFuture(outcome, 1)
    first.add_done_callback(lambda f: seen.append((f.result().offset, threading.current_thread())))

    def fail(_: WriteFuture) -> None:
        raise RuntimeError("a bad callback is logged, not raised")

    first.add_done_callback(fail)
    second.add_done_callback(lambda f: seen.append((f.result().offset, threading.current_thread())))
    worker = threading.Thread(target=outcome.set_result, args=(7,))
    worker.start()
    worker.join()
    assert seen == [(7, worker), (8, worker)]
    second.add_done_callback(lambda f: seen.append((f.result().offset, threading.current_thread())))
    assert seen[-1] == (8, threading.current_thread())
