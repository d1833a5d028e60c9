"""Byte-rate and request-time quotas of one broker: usage counted, throttle times answered.

Kafka's ``ClientQuotaManager`` per quota type, on Folio's table
(``QuotaStore.table``): each Produce request's size (``produce``) and each
Fetch answer's size (``fetch``) is recorded against the client's quota of
that type, and (``request``, Kafka's ``ClientRequestQuotaManager``) the time
the broker spent on each request, as a percentage of one thread's second
(``request_percentage`` 100: one whole thread). A quota is found by Kafka's
precedence (``QuotaTable.resolve``) from the
connection's user (its principal's role; ``ANONYMOUS``, Kafka's name, when
the listener authenticates no one) and the request header's client id. The
usage is counted per quota type and per the matched entity's tags
(``(user, client-id)``, "" for a component the entity lacks), so clients
under one user quota share it and a default quota is each one's own, as in
Kafka. A client with no quota of the type is not counted at all.

The answer is the throttle time in ms (0: within the quota), which the
connection puts in the response's ``throttle_time_ms`` and for which it then
reads nothing more from the client (``broker.kafka.quotas.mute``). Quotas are
per broker, as Kafka's: a client talking to three brokers may use each one's
quota. Counting is in memory, lost on restart (as Kafka's); a rate idle for
its whole window (11 s) is dropped. As Kafka's, a request-time throttle is
at most one window (1 s): the time a request took is not the client's to
shorten, so it is spread rather than punished.

The controller mutation quota is the part ``mutations``
(``broker.kafka.quotas.mutations``), on the same table and clock.

Metrics: ``folio_kafka_throttled_responses_total{quota}`` and
``folio_kafka_throttle_seconds_total{quota}`` (``quota``: ``produce``,
``fetch``, ``request``, ``controller_mutation``), what Kafka's per-client
``throttle-time`` sensors show, summed over the clients so the labels stay
bounded.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final

from broker.kafka.quotas.mutations import ControllerMutations
from broker.kafka.quotas.rate import MAX_THROTTLE_MS, SAMPLES, WINDOW_S, Rate
from broker.kafka.quotas.table import (
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    QuotaTable,
)
from broker.kafka.quotas.throttles import ANONYMOUS, counted

__all__ = ["ANONYMOUS", "FETCH", "PRODUCE", "REQUEST", "ClientQuotas"]

#: Kafka's quota types, by the key that bounds them.
PRODUCE: Final = PRODUCER_BYTE_RATE
FETCH: Final = CONSUMER_BYTE_RATE
REQUEST: Final = REQUEST_PERCENTAGE
_LABELS: Final = {PRODUCE: "produce", FETCH: "fetch", REQUEST: "request"}
#: The longest throttle of each type: Kafka bounds the request quota's by one window.
_MOST_MS: Final = {PRODUCE: MAX_THROTTLE_MS, FETCH: MAX_THROTTLE_MS,
                   REQUEST: round(WINDOW_S * 1000)}
#: Records between two sweeps of idle rates.
_SWEEP_EVERY: Final = 1024

class ClientQuotas:
    """The byte rates and request times of one broker's Kafka clients against the quota table."""

    def __init__(self, table: Callable[[], QuotaTable],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._table = table
        self._clock = clock
        self._rates: dict[tuple[str, str, str], Rate] = {}
        self._records = 0
        #: The controller mutation quota (CreateTopics, CreatePartitions, DeleteTopics).
        self.mutations = ControllerMutations(table, clock)

    def counts(self, kind: str) -> bool:
        """Whether some client has a quota of ``kind`` (none: nothing to measure)."""
        return self._table().has(kind)

    def record(self, kind: str, user: str | None, client_id: str | None,
               size: float) -> int:
        """Record ``size`` of ``kind``; the throttle time in ms.

        ``size``: bytes (``PRODUCE``, ``FETCH``), or (``REQUEST``) the seconds
        the broker spent on a request times 100 (Kafka's ``nanosToPercentage``).
        """
        table = self._table()
        if not table.entries:
            return 0
        found = table.resolve(kind, ANONYMOUS if user is None else user, client_id or "")
        if found is None:
            return 0
        quota, (user_tag, client_tag) = found
        now = self._clock()
        key = (kind, user_tag, client_tag)
        rate = self._rates.get(key)
        if rate is None:
            rate = self._rates[key] = Rate(now)
        rate.record(size, now)
        throttle_ms = rate.throttle_ms(quota, now, _MOST_MS[kind])
        if throttle_ms > 0:
            counted(_LABELS[kind], throttle_ms)
        self._records += 1
        if self._records % _SWEEP_EVERY == 0:
            self._sweep(now)
        return throttle_ms

    def window_bytes(self, kind: str, user: str | None, client_id: str | None) -> int | None:
        """The most bytes one answer may carry without certain throttling (None: no quota).

        Kafka's ``maxValueInQuotaWindow``: the quota over the window's full
        samples (10 s), so a Fetch's ``max_bytes`` is bounded by it and one
        answer does not earn a throttle of minutes.
        """
        table = self._table()
        if not table.entries:
            return None
        found = table.resolve(kind, ANONYMOUS if user is None else user, client_id or "")
        if found is None:
            return None
        return max(1, int(found[0] * (SAMPLES - 1) * WINDOW_S))

    def rates(self) -> int:
        """How many usages are being counted (for the tests)."""
        return len(self._rates)

    def _sweep(self, now: float) -> None:
        for key in [key for key, rate in self._rates.items() if rate.idle(now)]:
            del self._rates[key]
