"""A real Prometheus scrapes a ``folio standalone`` under load; its HTTP API shows the load.

Prometheus (the Debian package; ``.ci/run`` installs it) scrapes every second
and evaluates ``deploy/prometheus/folio-alerts.yml``. A writer thread keeps
appending while the test waits, with deadlines, for Prometheus to see a
positive append rate and finite latency percentiles; once the writer stops,
the counters Prometheus stored must equal exactly what was written and read,
and the rate must fall back to zero. Nothing is timed: every wait is for a
condition.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import folio
from tests.observability.load import read_all
from tests.observability.prometheus_server import (
    PROMETHEUS_MISSING,
    PrometheusServer,
    prometheus_path,
)
from tests.observability.scrape import metrics_url
from tests.observability.test_deploy_files import ALERTS
from tests.support.bookies import BookieProcess

pytestmark = pytest.mark.skipif(prometheus_path() is None, reason=PROMETHEUS_MISSING)

TOPIC = "prom"
BATCH = 200


@pytest.fixture
def prometheus(server: BookieProcess, tmp_path: Path) -> Iterator[PrometheusServer]:
    """Prometheus scraping the module's standalone, with Folio's alert rules."""
    target = metrics_url(server).removeprefix("http://").removesuffix("/metrics")
    started = PrometheusServer(tmp_path / "prometheus", [target], [ALERTS])
    yield started
    started.stop()


class _Writer(threading.Thread):
    """Writes batches of 100-byte events until stopped; ``written`` counts acknowledged ones."""

    def __init__(self, client: folio.Client) -> None:
        super().__init__(name="load", daemon=True)
        self._client = client
        self.stop_event = threading.Event()
        self.written = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with self._client.writer(TOPIC) as writer:
                while not self.stop_event.is_set():
                    for number in range(BATCH):
                        writer.write_event(b"p" * 100, routing_key=f"k{number % 8}")
                    writer.flush()
                    self.written += BATCH
        except BaseException as error:
            self.error = error

    def finish(self) -> int:
        self.stop_event.set()
        self.join(60)
        assert not self.is_alive(), "the writer did not stop"
        if self.error is not None:
            raise self.error
        return self.written


def _positive(value: float | None) -> bool:
    return value is not None and not math.isnan(value) and value > 0


def test_prometheus_sees_rates_and_histograms_of_the_load(
        client: folio.Client, prometheus: PrometheusServer) -> None:
    prometheus.wait_for(lambda: prometheus.scalar('up{job="folio"}') == 1.0,
                        "the standalone scraped (up == 1)")
    client.create_topic(TOPIC, segments=2)
    writer = _Writer(client)
    writer.start()
    try:
        rate = f'sum(rate(folio_appended_events_total{{topic="{TOPIC}"}}[5s]))'
        prometheus.wait_for(lambda: _positive(prometheus.scalar(rate)),
                            "a positive append rate while writing")
        for histogram in ("folio_append_seconds", "folio_ledger_add_seconds",
                          "folio_bookie_fsync_seconds"):
            p99 = f"histogram_quantile(0.99, sum by (le) (rate({histogram}_bucket[5s])))"
            def finite(query: str = p99) -> bool:
                return _positive(prometheus.scalar(query))

            prometheus.wait_for(finite, f"a finite p99 of {histogram} while writing")
        commits = "sum(rate(folio_bookie_group_commit_entries_count[5s]))"
        prometheus.wait_for(lambda: _positive(prometheus.scalar(commits)),
                            "group commits while writing")
    finally:
        written = writer.finish()
    assert written >= BATCH

    # Prometheus stored exactly what was written, then sees the rate fall to zero.
    total = f'sum(folio_appended_events_total{{topic="{TOPIC}"}})'
    prometheus.wait_for(lambda: prometheus.scalar(total) == written,
                        f"{written} appended events in Prometheus")
    prometheus.wait_for(lambda: prometheus.scalar(rate) == 0.0, "the append rate back to 0")

    assert read_all(client, TOPIC, written) == written
    read_total = f'sum(folio_read_events_total{{topic="{TOPIC}"}})'
    prometheus.wait_for(lambda: prometheus.scalar(read_total) == written,
                        f"{written} read events in Prometheus")

    # Each histogram's +Inf bucket is its count; an append is at least one entry.
    inf = prometheus.scalar('sum(folio_append_seconds_bucket{le="+Inf"})')
    assert inf == prometheus.scalar("sum(folio_append_seconds_count)")
    appends = prometheus.scalar("sum(folio_append_seconds_count)")
    entries = prometheus.scalar("sum(folio_bookie_added_entries_total)")
    assert appends is not None and entries is not None
    assert 1 <= appends <= written and entries >= appends


def test_prometheus_loads_and_evaluates_the_alert_rules(prometheus: PrometheusServer) -> None:
    def evaluated() -> bool:
        groups = prometheus.api("rules")["groups"]
        rules = [rule for group in groups for rule in group["rules"]]
        return len(rules) == 8 and all(
            rule["health"] == "ok" and rule.get("lastEvaluation", "").startswith("2")
            for rule in rules)

    prometheus.wait_for(evaluated, "all 8 alert rules evaluated without error")
    names = {rule["name"] for group in prometheus.api("rules")["groups"]
             for rule in group["rules"]}
    assert names == {"FolioDown", "FolioNoAppends", "FolioAppendLatencyHigh",
                     "FolioReaderGroupBacklogGrowing", "FolioBookieFsyncSlow",
                     "FolioServerErrors", "FolioTransactionsStuck",
                     "FolioLedgersUnderReplicated"}
    # The standalone is up and idle: nothing fires.
    assert prometheus.api("alerts")["alerts"] == []
