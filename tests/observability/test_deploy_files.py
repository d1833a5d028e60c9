"""deploy/: promtool accepts the rules and scrape config; the dashboard queries real metrics."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

import folio
from tests.observability.load import exercise
from tests.observability.scrape import scrape, wait_for

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
DASHBOARD = DEPLOY / "grafana" / "folio.json"
ALERTS = DEPLOY / "prometheus" / "folio-alerts.yml"
SCRAPE_CONFIG = DEPLOY / "prometheus" / "prometheus.yml"
CLUSTER_SCRAPE_CONFIG = DEPLOY / "prometheus" / "prometheus-cluster.yml"

_METRIC = re.compile(r"\bfolio_[a-z0-9_]+")
_PROMTOOL_MISSING = ("promtool is not on PATH (Debian package `prometheus`, which .ci/run "
                     "installs): deploy/prometheus is not checked")


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip(_PROMTOOL_MISSING)
    return subprocess.run([promtool, *args], capture_output=True, text=True, timeout=60,
                          check=False)


def test_promtool_accepts_the_alert_rules() -> None:
    checked = _promtool("check", "rules", str(ALERTS))

    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 8 rules found" in checked.stdout


@pytest.mark.parametrize("config", [SCRAPE_CONFIG, CLUSTER_SCRAPE_CONFIG], ids=lambda p: p.name)
def test_promtool_accepts_the_scrape_config(config: Path) -> None:
    checked = _promtool("check", "config", str(config))

    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "is valid prometheus config file syntax" in checked.stdout


def _queries(node: Any) -> list[str]:
    """Every PromQL text of the dashboard: panel targets and template variable queries."""
    found: list[str] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("expr", "definition") and isinstance(value, str):
                found.append(value)
            else:
                found.extend(_queries(value))
    elif isinstance(node, list):
        for item in node:
            found.extend(_queries(item))
    return found


def test_the_dashboard_covers_the_issue() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    titles = " ".join(panel["title"] for panel in dashboard["panels"]).lower()

    for subject in ("appended", "read", "latency", "backlog", "transactions", "errors"):
        assert subject in titles


def test_every_metric_the_dashboard_queries_is_on_metrics(
        client: folio.Client, url: str) -> None:
    names = {name for query in _queries(json.loads(DASHBOARD.read_text()))
             for name in _METRIC.findall(query)}
    assert len(names) >= 20
    exercise(client, "dashboard")
    client.reader_group("dashboard-group", ["dashboard"])

    # Gauges set by the maintenance round (the backlog) need one round.
    page = wait_for(url, lambda p: p.value("folio_reader_group_backlog_events") > 0,
                    what="a reader-group backlog")

    missing = sorted(name for name in names if name not in page.samples)
    assert missing == [], f"queried by the dashboard, no sample on /metrics: {missing}"
    # 1000 events, and one event in each of the two transactions (aborted ones are appended too).
    assert scrape(url).value("folio_appended_events_total", topic="dashboard") == 1002
