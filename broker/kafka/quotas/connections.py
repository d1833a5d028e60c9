"""Connection quotas of one broker's Kafka listeners: per-IP rate and counts, broker caps.

Kafka's ``ConnectionQuotas``, checked in its order when a connection is accepted,
against the limits in force now (``ConnectionLimits``: the flags, and over
them the dynamic broker configs, ``broker.kafka.dynamic_configs``):

0. the broker-wide ``max.connection.creation.rate`` and the listener's
   ``listener.name.<name>.max.connection.creation.rate`` (KIP-612), each a
   sampled rate: an attempt over either is held unread for the throttle
   time (at most one window) and then goes on, as Kafka's acceptor waits
   before accepting (counted in ``folio_kafka_connections_throttled_total``
   with reason ``broker_rate`` or ``listener_rate``);
1. ``max.connections`` and the listener's ``listener.name.<name>.max.connections``:
   at a cap, a new connection waits, unread, until another one closes or the
   cap is raised (Kafka's acceptor stops accepting; the client sees a
   connection that does not answer yet; reason ``max_connections``);
2. the client address's ``connection_creation_rate`` (an ``ip`` entity of
   the client quotas, or the default ip's; ``QuotaTable.resolve_ip``), a
   sampled rate as the other quotas' (``Rate``, 11 windows of 1 s): an
   attempt over it is counted, held unread for the throttle time (at most
   one window, as Kafka's ``boundedThrottleTime``) and then closed (Kafka's
   delayed close), so a client reconnecting in a loop cannot spin;
3. ``kafka_max_connections_per_ip`` (Kafka's ``max.connections.per.ip``, with
   ``kafka_max_connections_per_ip_overrides`` by address): one connection
   more than that from the address is closed at once.

A connection admitted counts until it closes (``leave``). Counts and rates
are in memory, per broker (per listener process), as Kafka's. Refusals are
logged at INFO (rate-limited per address by the rate itself) and counted in
``folio_kafka_connections_refused_total{reason}`` (``ip_rate``, ``ip_max``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from prometheus_client import Counter

from broker.kafka.quotas.limits import UNLIMITED, ConnectionLimits
from broker.kafka.quotas.rate import WINDOW_S, Rate
from broker.kafka.quotas.table import QuotaTable

__all__ = ["UNLIMITED", "Admission", "ConnectionQuotas"]

log = logging.getLogger(__name__)

#: How long a connection waiting at a cap sleeps before looking at the limits again
#: (a cap raised by a dynamic config frees it without a connection closing).
_RECHECK_S: Final = 1.0
#: The longest a refused connection is held before it is closed (Kafka: one window).
_MOST_MS: Final = round(WINDOW_S * 1000)
#: Admissions between two sweeps of idle rates.
_SWEEP_EVERY: Final = 256

REFUSED = Counter(
    "folio_kafka_connections_refused_total",
    "Kafka connections closed when accepted because of a connection quota, by reason "
    "(ip_rate: the address's connection_creation_rate; ip_max: max connections per ip).",
    ["reason"])
for _reason in ("ip_rate", "ip_max"):
    REFUSED.labels(_reason)
THROTTLED = Counter(
    "folio_kafka_connections_throttled_total",
    "Kafka connections held unread before being served, by reason (broker_rate: the "
    "broker's max.connection.creation.rate; listener_rate: the listener's; "
    "max_connections: waited at max.connections or the listener's max.connections).",
    ["reason"])
for _reason in ("broker_rate", "listener_rate", "max_connections"):
    THROTTLED.labels(_reason)


@dataclass(frozen=True, slots=True)
class Admission:
    """A new connection's verdict: admitted, or closed after ``close_after_ms``."""

    admitted: bool
    #: Refused: ms to hold the connection unread before closing it (0: at once).
    close_after_ms: int = 0
    reason: str = ""


class ConnectionQuotas:
    """The broker's connections by client address, against its caps and the ip quotas."""

    def __init__(self, table: Callable[[], QuotaTable], *, max_connections: int = UNLIMITED,
                 max_per_ip: int = UNLIMITED, per_ip_overrides: Mapping[str, int] | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 limits: Callable[[], ConnectionLimits] | None = None) -> None:
        """``limits``: the limits now (read on every admission); without it, the fixed ones."""
        self._table = table
        fixed = ConnectionLimits(max_connections, max_per_ip, dict(per_ip_overrides or {}))
        self._limits = limits or (lambda: fixed)
        self._clock = clock
        self._counts: dict[str, int] = {}
        self._listener_counts: dict[str, int] = {}
        self._total = 0
        self._rates: dict[str, Rate] = {}
        #: The broker-wide and per-listener creation rates ("" and listener names).
        self._creation: dict[str, Rate] = {}
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._admissions = 0

    @property
    def total(self) -> int:
        """Connections admitted and not yet closed."""
        return self._total

    def count(self, address: str) -> int:
        """Connections admitted from ``address`` and not yet closed."""
        return self._counts.get(address, 0)

    async def enter(self, address: str, listener: str = "") -> Admission:
        """Admit a connection from ``address`` on ``listener`` (waiting for a slot at a cap,
        and over a creation rate for its throttle time), or refuse it.

        An admitted connection must be ``leave``-d (with the same listener) once
        closed; a refused one not.
        """
        listener = listener.upper()
        await self._creation_throttle(listener)
        waited = False
        while not self._slot_free(listener):
            if not waited:
                THROTTLED.labels("max_connections").inc()
                waited = True
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await asyncio.wait({waiter}, timeout=_RECHECK_S)
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
        # No await from here on: the checks and the counts change together.
        limits = self._limits()
        throttle_ms = self._record_rate(address)
        if throttle_ms > 0:
            REFUSED.labels("ip_rate").inc()
            log.info("kafka: connection from %s over its connection_creation_rate: closed "
                     "after %d ms", address, throttle_ms)
            return Admission(False, throttle_ms, "ip_rate")
        count = self._counts.get(address, 0)
        if count >= limits.per_ip_overrides.get(address, limits.max_per_ip):
            REFUSED.labels("ip_max").inc()
            log.info("kafka: connection from %s refused: it has %d open, the most allowed "
                     "per ip", address, count)
            return Admission(False, 0, "ip_max")
        self._counts[address] = count + 1
        self._listener_counts[listener] = self._listener_counts.get(listener, 0) + 1
        self._total += 1
        return Admission(True)

    def leave(self, address: str, listener: str = "") -> None:
        """An admitted connection from ``address`` on ``listener`` closed: its slot is free."""
        count = self._counts.get(address, 0) - 1
        if count > 0:
            self._counts[address] = count
        else:
            self._counts.pop(address, None)
        listener = listener.upper()
        on_listener = self._listener_counts.get(listener, 0) - 1
        if on_listener > 0:
            self._listener_counts[listener] = on_listener
        else:
            self._listener_counts.pop(listener, None)
        self._total = max(0, self._total - 1)
        # Every waiter looks again: the slot freed may be on its listener or not.
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)

    def _slot_free(self, listener: str) -> bool:
        limits = self._limits()
        return (self._total < limits.max_connections and self._listener_counts.get(listener, 0)
                < limits.listener(listener).max_connections)

    async def _creation_throttle(self, listener: str) -> None:
        """Record the attempt on the broker's and the listener's creation rates; wait over them.

        Kafka's acceptor waits the longer of the two throttle times before
        accepting (bounded here by one window, as the ip rate's).
        """
        limits = self._limits()
        now = self._clock()
        waits: list[tuple[int, str]] = []
        for key, quota, reason in (("", limits.connection_rate, "broker_rate"),
                                   (f"listener:{listener}",
                                    limits.listener(listener).connection_rate, "listener_rate")):
            if quota >= UNLIMITED:
                self._creation.pop(key, None)
                continue
            rate = self._creation.get(key)
            if rate is None:
                rate = self._creation[key] = Rate(now)
            rate.record(1.0, now)
            waits.append((rate.throttle_ms(float(quota), now, _MOST_MS), reason))
        if not waits:
            return
        throttle_ms, reason = max(waits)
        if throttle_ms > 0:
            THROTTLED.labels(reason).inc()
            await asyncio.sleep(throttle_ms / 1000.0)

    def _record_rate(self, address: str) -> int:
        """Count an attempt from ``address`` against its connection_creation_rate; throttle ms."""
        table = self._table()
        found = table.resolve_ip(address) if table.entries else None
        if found is None:
            return 0
        quota, key = found
        now = self._clock()
        self._admissions += 1
        if self._admissions % _SWEEP_EVERY == 0:
            for idle in [k for k, rate in self._rates.items() if rate.idle(now)]:
                del self._rates[idle]
        rate = self._rates.get(key)
        if rate is None:
            rate = self._rates[key] = Rate(now)
        rate.record(1.0, now)
        return rate.throttle_ms(quota, now, _MOST_MS)
