"""The time the broker spends on one request: its handler's steps, not its waits.

Kafka's request quota (``request_percentage``) bounds the share of a request
handler thread's time a client uses (``requestThreadTimeNanos``: from the
handler taking the request until it is done with it, waits in purgatory not
included). Folio's handlers are coroutines on one event loop, where a
request's wall time is mostly waiting (a long-poll Fetch, appends being made
durable) while the loop serves others. ``StepTimer`` therefore drives the
handler's coroutine itself and sums the time each of its steps (each resumption
until it awaits again) holds the loop: the loop time this request used, which
is what one thread's share means here. Work the handler hands to other tasks
(a segment's append pipeline) is not counted, as Kafka's does not count its
other threads' work beyond the network thread's.

Cost: one ``perf_counter`` pair per step, used only while some client has a
request quota (``ClientQuotas.counts``).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Generator
from typing import Any, Generic, TypeVar

__all__ = ["StepTimer"]

T = TypeVar("T")


class StepTimer(Generic[T]):
    """Awaits ``work``, adding the seconds spent inside its steps to ``seconds``."""

    __slots__ = ("_clock", "_work", "seconds")

    def __init__(self, work: Awaitable[T],
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self._work = work
        self._clock = clock
        self.seconds = 0.0

    def __await__(self) -> Generator[Any, Any, T]:
        work = self._work.__await__()
        value: Any = None
        error: BaseException | None = None
        while True:
            started = self._clock()
            try:
                yielded = work.send(value) if error is None else work.throw(error)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]  # the awaitable's T
            finally:
                self.seconds += self._clock() - started
            value, error = None, None
            try:
                value = yield yielded
            except GeneratorExit:
                work.close()
                raise
            except BaseException as raised:  # cancellation included: the handler's to handle
                error = raised
