"""Connection quotas of one broker's Kafka listener: per-IP rate and counts, and a broker cap.

Kafka's ``ConnectionQuotas``, checked in its order when a connection is accepted:

1. ``kafka_max_connections`` (Kafka's ``max.connections``): at the cap, a new
   connection waits, unread, until another one closes (Kafka's acceptor
   stops accepting; the client sees a connection that does not answer yet);
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

from broker.kafka.quotas.rate import WINDOW_S, Rate
from broker.kafka.quotas.table import QuotaTable

__all__ = ["UNLIMITED", "Admission", "ConnectionQuotas"]

log = logging.getLogger(__name__)

#: Kafka's default of ``max.connections`` and ``max.connections.per.ip``: no limit.
UNLIMITED: Final = 2**31 - 1
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
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._table = table
        self._max_connections = max_connections
        self._max_per_ip = max_per_ip
        self._overrides = dict(per_ip_overrides or {})
        self._clock = clock
        self._counts: dict[str, int] = {}
        self._total = 0
        self._rates: dict[str, Rate] = {}
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._admissions = 0

    @property
    def total(self) -> int:
        """Connections admitted and not yet closed."""
        return self._total

    def count(self, address: str) -> int:
        """Connections admitted from ``address`` and not yet closed."""
        return self._counts.get(address, 0)

    async def enter(self, address: str) -> Admission:
        """Admit a connection from ``address`` (waiting for a slot at the cap), or refuse it.

        An admitted connection must be ``leave``-d once closed; a refused one not.
        """
        while self._total >= self._max_connections:
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
        # No await from here on: the checks and the counts change together.
        throttle_ms = self._record_rate(address)
        if throttle_ms > 0:
            REFUSED.labels("ip_rate").inc()
            log.info("kafka: connection from %s over its connection_creation_rate: closed "
                     "after %d ms", address, throttle_ms)
            return Admission(False, throttle_ms, "ip_rate")
        count = self._counts.get(address, 0)
        if count >= self._overrides.get(address, self._max_per_ip):
            REFUSED.labels("ip_max").inc()
            log.info("kafka: connection from %s refused: it has %d open, the most allowed "
                     "per ip", address, count)
            return Admission(False, 0, "ip_max")
        self._counts[address] = count + 1
        self._total += 1
        return Admission(True)

    def leave(self, address: str) -> None:
        """An admitted connection from ``address`` closed: its slot is free again."""
        count = self._counts.get(address, 0) - 1
        if count > 0:
            self._counts[address] = count
        else:
            self._counts.pop(address, None)
        self._total = max(0, self._total - 1)
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                break

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
