"""``ledger.lifecycle``: start in order, stop in reverse within deadlines, one process runner."""

from __future__ import annotations

import asyncio
import logging
import os
import signal

import pytest

from ledger import lifecycle
from ledger.lifecycle import ComponentStack, StartError, Step, run_loop, serve_stack


class _Part:
    """A component that records its calls in ``journal``."""

    def __init__(self, name: str, journal: list[str], *, fail_start: BaseException | None = None,
                 stop: str = "ok") -> None:
        self.name = name
        self._journal = journal
        self._fail_start = fail_start
        self._stop = stop

    async def start(self) -> None:
        self._journal.append(f"start {self.name}")
        if self._fail_start is not None:
            raise self._fail_start

    async def stop(self) -> None:
        self._journal.append(f"stop {self.name}")
        if self._stop == "raise":
            raise RuntimeError(f"{self.name} broke")
        if self._stop == "hang":
            await asyncio.Event().wait()
        if self._stop == "stubborn":  # swallows its cancellation and goes on waiting
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                self._journal.append(f"{self.name} swallowed its cancellation")
            await asyncio.Event().wait()


async def test_starts_in_order_and_stops_in_reverse() -> None:
    journal: list[str] = []
    stack = ComponentStack("test")
    for name in ("store", "topics", "server"):
        stack.add(_Part(name, journal))
    await stack.start()
    assert await stack.stop() is True
    assert journal == ["start store", "start topics", "start server",
                       "stop server", "stop topics", "stop store"]
    assert await stack.stop() is True  # nothing left: a second stop does nothing
    assert len(journal) == 6


async def test_a_start_failure_stops_those_started_before_and_raises() -> None:
    journal: list[str] = []
    stack = ComponentStack("test")
    stack.add(_Part("store", journal))
    stack.add(_Part("topics", journal))
    stack.add(_Part("server", journal, fail_start=StartError("port taken")))
    stack.add(_Part("kafka", journal))
    with pytest.raises(StartError, match="port taken"):
        await stack.start()
    # The one that failed undoes its own start: it is not stopped, nor anything after it.
    assert journal == ["start store", "start topics", "start server",
                       "stop topics", "stop store"]


async def test_a_stop_over_its_deadline_is_abandoned_and_the_rest_still_stop(
        caplog: pytest.LogCaptureFixture) -> None:
    journal: list[str] = []
    stack = ComponentStack("test")
    stack.add(_Part("store", journal))
    stack.add(_Part("stubborn", journal, stop="stubborn"), stop_timeout_s=0.05)
    stack.add(_Part("hung", journal, stop="hang"), stop_timeout_s=0.05)
    stack.add(_Part("server", journal))
    await stack.start()
    with caplog.at_level(logging.WARNING, logger="ledger.lifecycle"):
        assert await asyncio.wait_for(stack.stop(), 30) is True
    assert journal[4:] == ["stop server", "stop hung", "stop stubborn",
                           "stubborn swallowed its cancellation", "stop store"]
    assert stack.abandoned == ["hung", "stubborn"]
    assert "stopping hung took over 0.1 s: abandoned" in caplog.text


async def test_a_stop_that_raises_is_logged_and_the_rest_still_stop(
        caplog: pytest.LogCaptureFixture) -> None:
    journal: list[str] = []
    stack = ComponentStack("test")
    stack.add(_Part("store", journal))
    stack.add(_Part("broken", journal, stop="raise"))
    await stack.start()
    with caplog.at_level(logging.ERROR, logger="ledger.lifecycle"):
        assert await stack.stop() is False
    assert journal[2:] == ["stop broken", "stop store"]
    assert stack.failed == ["broken"]
    assert "stopping broken failed" in caplog.text and "broken broke" in caplog.text


async def test_a_step_runs_its_functions_sync_or_async() -> None:
    journal: list[str] = []

    async def start() -> None:
        journal.append("start")

    stack = ComponentStack("test")
    stack.add(Step("sync stop", start, lambda: journal.append("sync stop")))
    stack.add(Step("nothing"))
    await stack.start()
    await stack.stop()
    assert journal == ["start", "sync stop"]
    with pytest.raises(ValueError, match="stop_timeout_s must be > 0"):
        stack.add(Step("x"), stop_timeout_s=0)


async def test_serve_stack_prints_the_ready_line_and_stops_on_sigterm(
        capsys: pytest.CaptureFixture[str]) -> None:
    journal: list[str] = []
    started = asyncio.Event()
    stack = ComponentStack("test")
    stack.add(_Part("store", journal))

    async def ready() -> None:
        started.set()

    stack.add(Step("ready", ready))
    serving = asyncio.create_task(serve_stack("folio test", stack, lambda: "folio test ready"))
    await asyncio.wait_for(started.wait(), 30)
    await asyncio.sleep(0)  # the ready line is printed right after the last start
    os.kill(os.getpid(), signal.SIGTERM)
    os.kill(os.getpid(), signal.SIGTERM)  # a second one only logs
    assert await asyncio.wait_for(serving, 30) == 0
    assert journal == ["start store", "stop store"]
    assert capsys.readouterr().out == "folio test ready\n"


async def test_serve_stack_fails_with_one_line_and_exit_1(
        capsys: pytest.CaptureFixture[str]) -> None:
    journal: list[str] = []
    stack = ComponentStack("test")
    stack.add(_Part("store", journal))
    stack.add(_Part("server", journal, fail_start=StartError("cannot bind 127.0.0.1:1")))
    assert await serve_stack("folio test", stack, lambda: "never") == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == "folio test: error: cannot bind 127.0.0.1:1\n"
    assert journal == ["start store", "start server", "stop store"]


def test_run_loop_leaves_a_task_that_ignores_its_cancellation(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(lifecycle, "LEFTOVER_TIMEOUT_S", 0.05)

    async def stubborn() -> None:
        while True:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                continue

    left: list[asyncio.Task[None]] = []

    async def main() -> int:
        left.append(asyncio.get_running_loop().create_task(stubborn(), name="stubborn"))
        await asyncio.sleep(0)
        return 3

    with caplog.at_level(logging.WARNING, logger="ledger.lifecycle"):
        assert run_loop(main()) == 3
    assert "left running at exit" in caplog.text and "stubborn" in caplog.text
    assert not left[0].done()
    left[0]._log_destroy_pending = False  # type: ignore[attr-defined]  # left on purpose
    left[0].get_coro().close()
