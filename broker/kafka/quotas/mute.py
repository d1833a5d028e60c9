"""One connection's throttling: the throttle time its answers carry, and its mute after them.

As Kafka's broker since 2.0 (KIP-219): a request over its client's quota is
answered at once, its ``throttle_time_ms`` set, and the connection then reads
nothing more from the client until that time has passed after the answer
(Kafka mutes the channel once the answer is sent; here the wait starts when
the answer is ready to send, which is at most the sending earlier). Current
clients also hold back their own requests for that time. Nothing is
dropped or reordered: the answer is the one the request earned (a Fetch
keeps its records, where Kafka answers a throttled Fetch empty and the
client fetches the same offsets again), and the next request is only read
later, then served as any other. An acks=0 Produce, which gets no answer,
mutes the connection all the same (as Kafka's).

What is counted (``ClientQuotas``): a Produce request's size in bytes
(Kafka's ``request.sizeInBytes``) when it is read, a Fetch answer's size when
it is encoded. A Fetch over the quota is encoded a second time with its
throttle time (only then; the field has a fixed width, so the size counted
is the size sent). As in Kafka, a Fetch's ``max_bytes`` is bounded by the
quota's window (``bounded``), so one answer cannot earn a throttle of minutes.
The time spent on each request (``handled``: its decoding and its handler's
steps, ``broker.kafka.quotas.timing``) is counted against the client's
request quota. A handler may answer a throttle time of its own (the
controller mutation quota's, ``broker.kafka.quotas.mutations``;
``declared``). The answer carries the largest throttle time of all, and the
mute lasts that long, as Kafka's broker mutes for the largest of its quotas'.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
from collections.abc import Awaitable
from typing import Any

from broker.kafka.dispatch import Call
from broker.kafka.handlers.fetch import FETCH_KEY
from broker.kafka.handlers.produce import PRODUCE_KEY
from broker.kafka.messages import has_field
from broker.kafka.quotas.enforcer import FETCH, PRODUCE, REQUEST, ClientQuotas
from broker.kafka.quotas.timing import StepTimer

__all__ = ["Throttle", "declared", "with_throttle"]


def with_throttle(response: Any, throttle_ms: int) -> Any:
    """``response`` with its ``throttle_time`` at ``throttle_ms`` (as is: 0, or no such field)."""
    if throttle_ms <= 0 or response is None or not has_field(type(response), "throttle_time"):
        return response
    return dataclasses.replace(response,
                               throttle_time=datetime.timedelta(milliseconds=throttle_ms))


class Throttle:
    """The quotas' verdicts on one connection's requests, and the mute they call for."""

    def __init__(self, quotas: ClientQuotas | None) -> None:
        self._quotas = quotas
        self._mute: tuple[asyncio.Future[Any], int] | None = None

    def bounded(self, call: Call) -> Call:
        """``call``, a Fetch's ``max_bytes`` lowered to what its quota's window holds.

        As Kafka's broker (``maxValueInQuotaWindow``): at most the quota times
        10 s (at least one batch is still answered, as always).
        """
        if self._quotas is None or call.api_key != FETCH_KEY:
            return call
        most = self._quotas.window_bytes(FETCH, _user(call), call.client_id)
        if most is None or call.request.max_bytes <= most:
            return call
        return dataclasses.replace(call, request=dataclasses.replace(call.request,
                                                                     max_bytes=most))

    def on_request(self, call: Call, size: int) -> int:
        """Throttle ms of a request of ``size`` bytes (a Produce; others: 0)."""
        if self._quotas is None or call.api_key != PRODUCE_KEY:
            return 0
        return self._quotas.record(PRODUCE, _user(call), call.client_id, size)

    def on_answer(self, call: Call, size: int) -> int:
        """Throttle ms of an answer of ``size`` bytes (a Fetch's; others: 0)."""
        if self._quotas is None or call.api_key != FETCH_KEY:
            return 0
        return self._quotas.record(FETCH, _user(call), call.client_id, size)

    async def handled(self, call: Call, work: Awaitable[Any],
                      decode_s: float) -> tuple[Any, int]:
        """(the handler's answer, the request quota's throttle ms) of running ``work``.

        ``decode_s``: the seconds the request took to decode, counted too.
        Without any request quota, ``work`` is simply awaited.
        """
        if self._quotas is None or not self._quotas.counts(REQUEST):
            return await work, 0
        timer = StepTimer(work)
        response = await timer
        return response, self._quotas.record(REQUEST, _user(call), call.client_id,
                                             (timer.seconds + decode_s) * 100.0)

    def mute_after(self, answer: asyncio.Future[Any], throttle_ms: int) -> None:
        """Read nothing for ``throttle_ms`` once ``answer`` is ready (0: no mute)."""
        if throttle_ms > 0:
            self._mute = (answer, throttle_ms)

    async def wait(self) -> None:
        """Until the last throttled answer is ready and its throttle time has passed."""
        if self._mute is None:
            return
        answer, throttle_ms = self._mute
        self._mute = None
        await asyncio.wait((answer,))
        await asyncio.sleep(throttle_ms / 1000.0)


def declared(response: Any) -> int:
    """The throttle time (ms) a handler put in its answer (the controller mutation quota's)."""
    throttle = getattr(response, "throttle_time", None)
    if not isinstance(throttle, datetime.timedelta):
        return 0
    return max(0, round(throttle.total_seconds() * 1000))


def _user(call: Call) -> str | None:
    return None if call.principal is None else call.principal.role
