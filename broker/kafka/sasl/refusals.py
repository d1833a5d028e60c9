"""Refused Kafka connections: a counter by reason, and a log line naming the client (rate-limited).

Every connection the listener closes because it did not authenticate (a
failed TLS handshake, a SASL refusal, a request before authentication, a
session whose lifetime passed, a frame over the pre-authentication size cap)
counts once in
``folio_kafka_auth_failures_total{reason}`` and is logged at WARNING with the
client's address, at most ``LOG_EVERY_S`` apart per reason (the lines in
between are counted and their number given with the next one), so a client
retrying in a loop cannot flood the log.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Final

from prometheus_client import Counter

__all__ = ["AUTH_FAILURES", "REASONS", "Refusals"]

log = logging.getLogger(__name__)

#: Bounded labels of the counter.
REASONS: Final = ("tls_handshake", "bad_credentials", "bad_token", "expired_token",
                  "unsupported_mechanism", "bad_message", "unauthenticated_request",
                  "session_expired", "no_client_certificate", "frame_too_large")
AUTH_FAILURES = Counter(
    "folio_kafka_auth_failures_total",
    "Kafka connections closed because they did not authenticate, by reason.", ["reason"])
#: At most one log line per reason this often (seconds).
LOG_EVERY_S: Final = 10.0


class Refusals:
    """Counts and logs refused connections (one per listener)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._last: dict[str, float] = {}
        self._quiet: dict[str, int] = {}

    def refused(self, reason: str, peer: str, detail: str) -> None:
        """Count one refusal of ``peer`` and log it unless one was logged lately."""
        label = reason if reason in REASONS else "bad_message"
        AUTH_FAILURES.labels(label).inc()
        now = self._clock()
        last = self._last.get(label)
        if last is not None and now - last < LOG_EVERY_S:
            self._quiet[label] = self._quiet.get(label, 0) + 1
            return
        self._last[label] = now
        quiet = self._quiet.pop(label, 0)
        more = f" ({quiet} more like it not logged)" if quiet else ""
        log.warning("kafka: refused connection from %s (%s): %s%s", peer, label, detail, more)
