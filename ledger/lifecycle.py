"""Process start and stop as a stack of components (BookKeeper's ``LifecycleComponentStack``).

Every server process (``folio standalone``, ``folio broker``, ``folio bookie``,
``folio autorecovery``) is a ``ComponentStack``: its parts (the metadata
store, the bookie's storage, the topics, the gRPC and Kafka listeners, the
cluster registration, ...) are ``Component``\\ s added in the order they start;
they stop in the reverse order. ``run_process`` runs a stack as the process:

1. it installs the signal handlers first: SIGTERM and SIGINT ask for a
   graceful stop (a second one only logs: the first one's stop is under way,
   SIGKILL stops at once); SIGUSR2 writes every task's and thread's stack to
   stderr (``ledger.stack_dump``) and the process goes on;
2. it starts the components in order. One that cannot start raises
   ``StartError``: the ones already started stop (in reverse), the process
   prints ``PROG: error: MESSAGE`` on stderr and exits 1. A stop asked for
   while starting is honoured once the start is complete;
3. it prints the ready line (scripts and tests read the port from it) and
   waits for SIGTERM or SIGINT;
4. it stops the components in reverse order, each within its own deadline
   (``stop_timeout_s``): one that overruns it is logged and abandoned
   (cancelled, not waited for), and the rest still stop; a stop that raises
   is logged and the process exits 1. Exit code 0 otherwise.

The event loop is then closed with a bounded wait for tasks still running (an
abandoned stop among them), so that nothing left behind keeps the process
from exiting. This module is the one place that swallows a cancellation: of a
component's stop it abandoned, and of leftover tasks at exit.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Final, Protocol, TypeVar

from ledger.stack_dump import DUMP_SIGNAL, install_stack_dump

__all__ = [
    "DEFAULT_STOP_TIMEOUT_S",
    "Component",
    "ComponentStack",
    "StartError",
    "Step",
    "run_process",
    "serve_stack",
]

log = logging.getLogger(__name__)

#: A component's deadline to stop, unless it is added with another.
DEFAULT_STOP_TIMEOUT_S: Final = 10.0
#: How long the loop's leftover tasks get to end once cancelled, at exit.
LEFTOVER_TIMEOUT_S: Final = 2.0

_STOP_SIGNALS: Final = (signal.SIGTERM, signal.SIGINT)


class Component(Protocol):
    """A part of a process that starts and stops.

    ``start`` raises ``StartError`` (a message for the operator) when it cannot
    start, having undone what it did itself: ``stop`` is called only for
    components whose ``start`` returned. ``stop`` is called at most once, and
    releases everything ``start`` acquired, the background tasks it started
    first. Its deadline bounds what it awaits: work it does synchronously
    (a bookie's final flush) blocks the loop and cannot be abandoned.
    """

    @property
    def name(self) -> str:
        """What the logs call it."""
        ...

    async def start(self) -> None:
        """Acquire and start; ``StartError`` if it cannot."""
        ...

    async def stop(self) -> None:
        """Stop and release; within the deadline the stack gives it."""
        ...


class StartError(Exception):
    """A component cannot start; the message is the process's one line on stderr (exit 1)."""


@dataclass
class Step:
    """A component made of two functions (a part with nothing more to it)."""

    name: str
    on_start: Callable[[], Awaitable[None]] | None = None
    on_stop: Callable[[], Awaitable[None] | None] | None = None

    async def start(self) -> None:
        if self.on_start is not None:
            await self.on_start()

    async def stop(self) -> None:
        if self.on_stop is not None:
            result = self.on_stop()
            if result is not None:
                await result


@dataclass(frozen=True)
class _Entry:
    component: Component
    stop_timeout_s: float


C = TypeVar("C", bound=Component)


class ComponentStack:
    """Components started in the order added, stopped in reverse, each within its deadline.

    Args:
        name: the process's name, for the logs.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._entries: list[_Entry] = []
        self._started: list[_Entry] = []
        #: Names of the components whose stop overran its deadline (abandoned).
        self.abandoned: list[str] = []
        #: Names of the components whose stop raised.
        self.failed: list[str] = []

    def add(self, component: C, *, stop_timeout_s: float = DEFAULT_STOP_TIMEOUT_S) -> C:
        """Add ``component`` on top (it starts after, and stops before, those added so far)."""
        if stop_timeout_s <= 0:
            raise ValueError(f"stop_timeout_s must be > 0, got {stop_timeout_s}")
        self._entries.append(_Entry(component, stop_timeout_s))
        return component

    @property
    def stop_timeout_s(self) -> float:
        """The longest the whole stack may take to stop: the sum of the deadlines."""
        return sum(entry.stop_timeout_s for entry in self._entries)

    async def start(self) -> None:
        """Start every component in order.

        If one raises (``StartError`` or anything else, a cancellation too),
        those started before it are stopped in reverse and the error raised.
        """
        for entry in self._entries[len(self._started):]:
            log.debug("%s: starting %s", self.name, entry.component.name)
            try:
                await entry.component.start()
            except BaseException:
                await self.stop()
                raise
            self._started.append(entry)

    async def stop(self) -> bool:
        """Stop the started components in reverse order; True if each stopped cleanly.

        Each gets its deadline: one that overruns it is cancelled and left
        behind (``abandoned``), one that raises is logged (``failed``); the
        rest still stop either way.
        """
        clean = True
        while self._started:
            entry = self._started.pop()
            clean = await self._stop_one(entry) and clean
        return clean

    async def _stop_one(self, entry: _Entry) -> bool:
        name = entry.component.name
        began = time.monotonic()
        task = asyncio.ensure_future(entry.component.stop())
        done, _ = await asyncio.wait({task}, timeout=entry.stop_timeout_s)
        if not done:
            task.cancel()  # once: it is not waited for, whatever it does with it
            task.add_done_callback(_consume)
            self.abandoned.append(name)
            log.warning("%s: stopping %s took over %.1f s: abandoned, the rest still stop",
                        self.name, name, entry.stop_timeout_s)
            return True
        if task.cancelled():
            self.failed.append(name)
            log.error("%s: stopping %s was cancelled", self.name, name)
            return False
        error = task.exception()
        if error is not None:
            self.failed.append(name)
            log.error("%s: stopping %s failed", self.name, name, exc_info=error)
            return False
        log.debug("%s: %s stopped in %.3f s", self.name, name, time.monotonic() - began)
        return True


def _consume(task: asyncio.Future[Any]) -> None:
    """Retrieve an abandoned stop's outcome, so that nothing is reported as never retrieved."""
    if not task.cancelled() and task.exception() is not None:
        log.warning("an abandoned stop ended with %r", task.exception())


def _fail(prog: str, message: str) -> int:
    print(f"{prog}: error: {message}", file=sys.stderr, flush=True)
    return 1


async def serve_stack(prog: str, stack: ComponentStack, ready_line: Callable[[], str]) -> int:
    """Start ``stack``, print ``ready_line()``, wait for SIGTERM or SIGINT, stop; the exit code.

    Steps 1 to 4 of the module docstring, on the running loop (``run_process``
    runs it in a loop of its own).
    """
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_signal(signum: signal.Signals) -> None:
        if stop.is_set():
            log.warning("%s while stopping: already stopping gracefully (SIGKILL stops at once)",
                        signum.name)
        stop.set()

    # Installed for the whole run: a second signal must not cut short the
    # graceful stop the first one started.
    for signum in _STOP_SIGNALS:
        loop.add_signal_handler(signum, on_signal, signum)
    install_stack_dump(loop)  # kill -USR2: the tasks' and threads' stacks on stderr
    try:
        try:
            await stack.start()
        except StartError as error:
            return _fail(prog, str(error))
        try:
            print(ready_line(), flush=True)
            await stop.wait()
            log.info("%s: stopping", prog)
        finally:
            clean = await stack.stop()
        if not clean:
            return _fail(prog, f"stopping {', '.join(stack.failed)} failed (see the log)")
        log.info("%s stopped", prog)
        return 0
    finally:
        for signum in (*_STOP_SIGNALS, DUMP_SIGNAL):
            loop.remove_signal_handler(signum)


def run_process(prog: str, build: Callable[[], ComponentStack],
                ready_line: Callable[[], str]) -> int:
    """Run the stack ``build()`` makes as this process until SIGTERM or SIGINT; the exit code.

    ``build`` runs on the process's event loop (components may take it).
    """
    async def main() -> int:
        return await serve_stack(prog, build(), ready_line)

    return run_loop(main())


def run_loop(main: Coroutine[Any, Any, int]) -> int:
    """``asyncio.run(main)``, but with a bounded wait for the tasks left at the end.

    ``asyncio.run`` cancels the tasks still running and waits for every one
    of them: a task that ignores its cancellation (an abandoned stop, or
    Python 3.11's ``wait_for`` losing one) would keep the process for ever.
    Here they get ``LEFTOVER_TIMEOUT_S``, are named in the log, and are left.
    """
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        return loop.run_until_complete(main)
    finally:
        try:
            _cancel_leftovers(loop)
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())
        finally:
            asyncio.set_event_loop(None)
            loop.close()


def _cancel_leftovers(loop: asyncio.AbstractEventLoop) -> None:
    tasks = asyncio.all_tasks(loop)
    if not tasks:
        return
    for task in tasks:
        task.cancel()
    _, pending = loop.run_until_complete(asyncio.wait(tasks, timeout=LEFTOVER_TIMEOUT_S))
    for task in tasks - pending:
        if not task.cancelled() and task.exception() is not None:
            loop.call_exception_handler({"message": "unhandled exception of a task left at exit",
                                         "exception": task.exception(), "task": task})
    for task in pending:
        log.warning("left running at exit (it ignored its cancellation): %r", task)
