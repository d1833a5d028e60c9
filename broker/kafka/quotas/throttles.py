"""What every quota type shares: the anonymous user's name and the throttle metrics.

``folio_kafka_throttled_responses_total{quota}`` counts the Kafka answers that
carried a throttle time, ``folio_kafka_throttle_seconds_total{quota}`` their
seconds, by quota type (``produce``, ``fetch``, ``request``,
``controller_mutation``): what Kafka's per-client ``throttle-time`` sensors
show, summed over the clients so the labels stay bounded.
"""

from __future__ import annotations

from typing import Final

from prometheus_client import Counter

__all__ = ["ANONYMOUS", "LABELS", "THROTTLED", "THROTTLE_SECONDS", "counted"]

#: The user name of a connection that authenticated no one (Kafka's ``KafkaPrincipal.ANONYMOUS``).
ANONYMOUS: Final = "ANONYMOUS"
#: The ``quota`` label's values.
LABELS: Final = ("produce", "fetch", "request", "controller_mutation")

THROTTLED = Counter(
    "folio_kafka_throttled_responses_total",
    "Kafka answers that carried a throttle time because the client was over a quota, by "
    "quota (produce, fetch, request, controller_mutation).", ["quota"])
THROTTLE_SECONDS = Counter(
    "folio_kafka_throttle_seconds_total",
    "Seconds of throttle time answered to Kafka clients over a quota (the connection reads "
    "nothing from them meanwhile), by quota (produce, fetch, request, controller_mutation).",
    ["quota"])
for _label in LABELS:  # every series from the start, at 0
    THROTTLED.labels(_label)
    THROTTLE_SECONDS.labels(_label)


def counted(label: str, throttle_ms: int) -> None:
    """Count one answer throttled for ``throttle_ms`` under ``label``."""
    THROTTLED.labels(label).inc()
    THROTTLE_SECONDS.labels(label).inc(throttle_ms / 1000.0)
