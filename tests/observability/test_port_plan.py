"""One port plan (docs/cluster.md, "Ports") for `make run`, `make cluster`, the chart and
the shipped Prometheus configs; each config run by a real Prometheus against what it
is for, with no target down and no alert pending or firing.

The static half reads the plan from where each part keeps it (the servers' config
defaults, ``scripts/cluster.py``'s options, the chart's values, the Prometheus
files) and checks they agree and that no API port is a metrics port. The live
half runs the shipped ``deploy/prometheus/prometheus.yml`` against a real
``folio standalone`` and ``prometheus-cluster.yml`` against a real
``scripts/cluster.py up``: the processes listen on free ports (other work on
the machine may hold the planned ones), so each planned target is rewritten to
where the process with that role listens; job names, rule files and target
counts are the shipped ones.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from broker.broker_config import BrokerConfig
from ledger.config import BookieListenConfig
from tests.observability.prometheus_server import (
    PROMETHEUS_MISSING,
    PrometheusServer,
    prometheus_path,
)
from tests.observability.scrape import metrics_url
from tests.support.bookies import BookieProcess
from tests.support.zookeeper import free_port

ROOT = Path(__file__).resolve().parents[2]
PROMETHEUS_DIR = ROOT / "deploy" / "prometheus"
STANDALONE_CONFIG = PROMETHEUS_DIR / "prometheus.yml"
CLUSTER_CONFIG = PROMETHEUS_DIR / "prometheus-cluster.yml"
VALUES = ROOT / "deploy" / "helm" / "folio" / "values.yaml"


def _cluster_defaults() -> argparse.Namespace:
    """``scripts/cluster.py up``'s defaults: its port constants and 3 bookies, 3 brokers."""
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        spec = importlib.util.spec_from_file_location("folio_cluster_script",
                                                      ROOT / "scripts" / "cluster.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # its dataclasses look their module up
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    return argparse.Namespace(
        brokers=3, bookies=3, zk_port=module.ZK_PORT, bookie_port=module.BOOKIE_PORT,
        bookie_metrics_port=module.BOOKIE_METRICS_PORT, broker_port=module.BROKER_PORT,
        broker_metrics_port=module.BROKER_METRICS_PORT)


def _defaults(config: type) -> argparse.Namespace:
    """A config dataclass's field defaults."""
    return argparse.Namespace(**{field.name: field.default for field in dataclasses.fields(config)
                                 if field.default is not dataclasses.MISSING})


def _targets(config: Path) -> dict[str, list[str]]:
    loaded = yaml.safe_load(config.read_text())
    return {job["job_name"]: [t for group in job["static_configs"] for t in group["targets"]]
            for job in loaded["scrape_configs"]}


def _ports(addresses: list[str]) -> list[int]:
    return [int(address.rsplit(":", 1)[1]) for address in addresses]


def test_the_port_plan_holds_everywhere() -> None:
    broker, bookie = _defaults(BrokerConfig), _defaults(BookieListenConfig)
    cluster = _cluster_defaults()
    values = yaml.safe_load(VALUES.read_text())

    # make run and the chart: the servers' defaults.
    assert (broker.port, broker.metrics_port, bookie.port, bookie.metrics_port) == (
        7070, 7071, 3181, 8000)
    assert (values["broker"]["apiPort"], values["broker"]["metricsPort"]) == (
        broker.port, broker.metrics_port)
    assert (values["bookie"]["apiPort"], values["bookie"]["metricsPort"]) == (
        bookie.port, bookie.metrics_port)
    assert values["broker"]["kafka"]["port"] == 9092
    assert _targets(STANDALONE_CONFIG) == {"folio-broker": [f"127.0.0.1:{broker.metrics_port}"]}

    # make cluster: consecutive ports from each option's default.
    def run(first: int, count: int) -> list[int]:
        return list(range(first, first + count))

    cluster_api = (run(cluster.broker_port, cluster.brokers)
                   + run(cluster.bookie_port, cluster.bookies) + [cluster.zk_port])
    cluster_metrics = (run(cluster.broker_metrics_port, cluster.brokers)
                       + run(cluster.bookie_metrics_port, cluster.bookies))
    targets = _targets(CLUSTER_CONFIG)
    assert _ports(targets["folio-broker"]) == run(cluster.broker_metrics_port, cluster.brokers)
    assert _ports(targets["folio-bookie"]) == run(cluster.bookie_metrics_port, cluster.bookies)

    # No API port is a metrics port, and make run and make cluster run side by side.
    api = {broker.port, bookie.port, 9092, *cluster_api}
    metrics = {broker.metrics_port, bookie.metrics_port, *cluster_metrics}
    assert api & metrics == set()
    standalone = {broker.port, broker.metrics_port}
    assert standalone & {*cluster_api, *cluster_metrics} == set()


needs_prometheus = pytest.mark.skipif(prometheus_path() is None, reason=PROMETHEUS_MISSING)


def _retargeted(config: Path, where: dict[str, str]) -> list[dict[str, Any]]:
    """The config's scrape jobs, each target replaced by ``where[target]``, scraped each second."""
    jobs = yaml.safe_load(config.read_text())["scrape_configs"]
    for job in jobs:
        job["scrape_interval"] = "1s"
        job["scrape_timeout"] = "1s"
        for group in job["static_configs"]:
            group["targets"] = [where[target] for target in group["targets"]]
    return list(jobs)


def _rule_files(config: Path) -> list[Path]:
    return [config.parent / name for name in yaml.safe_load(config.read_text())["rule_files"]]


def _healthy(prometheus: PrometheusServer, jobs: dict[str, int]) -> None:
    """Every target of every job up, every rule evaluated, no alert at all."""
    def all_up() -> bool:
        active = prometheus.api("targets")["activeTargets"]
        by_job: dict[str, list[str]] = {}
        for target in active:
            by_job.setdefault(target["labels"]["job"], []).append(target["health"])
        return (sorted(by_job) == sorted(jobs)
                and all(len(by_job[job]) == count and set(by_job[job]) == {"up"}
                        for job, count in jobs.items()))

    prometheus.wait_for(all_up, f"every target up ({jobs})")

    def evaluated() -> bool:
        rules = [rule for group in prometheus.api("rules")["groups"] for rule in group["rules"]]
        return len(rules) == 8 and all(
            rule["health"] == "ok" and rule.get("lastEvaluation", "").startswith("2")
            for rule in rules)

    prometheus.wait_for(evaluated, "all 8 alert rules evaluated without error")
    # `up` is 1 for every target in the same evaluation the rules saw.
    down = prometheus.query('up{job=~"folio-.*"} == 0')
    assert down == []
    assert prometheus.api("alerts")["alerts"] == []


@needs_prometheus
def test_the_shipped_config_scrapes_make_run(server: BookieProcess, tmp_path: Path) -> None:
    """prometheus.yml against a standalone (the conftest's, as `make run` starts it)."""
    planned = _targets(STANDALONE_CONFIG)["folio-broker"][0]
    actual = metrics_url(server).removeprefix("http://").removesuffix("/metrics")
    prometheus = PrometheusServer(tmp_path / "prometheus", [], _rule_files(STANDALONE_CONFIG),
                                  _retargeted(STANDALONE_CONFIG, {planned: actual}))
    try:
        _healthy(prometheus, {"folio-broker": 1})
    finally:
        prometheus.stop()


def _free_base(count: int) -> int:
    """A first port of ``count`` consecutive ports free on 127.0.0.1 now (scripts/free_ports.py)."""
    return free_port(count=count)


@pytest.fixture
def local_cluster(tmp_path: Path) -> Iterator[tuple[argparse.Namespace, dict[str, int]]]:
    """``scripts/cluster.py up`` with the default counts, on free ports; down at the end."""
    defaults = _cluster_defaults()
    bases = {option: _free_base(max(defaults.brokers, defaults.bookies))
             for option in ("broker_port", "broker_metrics_port", "bookie_port",
                            "bookie_metrics_port")}
    bases["zk_port"] = _free_base(1)
    directory = tmp_path / "cluster"
    script = [sys.executable, str(ROOT / "scripts" / "cluster.py"), "--dir", str(directory)]
    flags = [part for option, base in bases.items()
             for part in (f"--{option.replace('_', '-')}", str(base))]
    started = subprocess.run([*script, "up", *flags], capture_output=True, text=True,
                             timeout=600, check=False, cwd=ROOT)
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        yield defaults, bases
    finally:
        stopped = subprocess.run([*script, "down"], capture_output=True, text=True,
                                 timeout=300, check=False, cwd=ROOT)
        assert stopped.returncode == 0, stopped.stderr


@needs_prometheus
@pytest.mark.timeout(900)
def test_the_shipped_config_scrapes_make_cluster(
        local_cluster: tuple[argparse.Namespace, dict[str, int]], tmp_path: Path) -> None:
    """prometheus-cluster.yml against `scripts/cluster.py up` (3 bookies, 3 brokers)."""
    defaults, bases = local_cluster
    where = {}
    for option in ("broker_metrics_port", "bookie_metrics_port"):
        for index in range(defaults.brokers if option.startswith("broker") else defaults.bookies):
            where[f"127.0.0.1:{getattr(defaults, option) + index}"] = (
                f"127.0.0.1:{bases[option] + index}")
    prometheus = PrometheusServer(tmp_path / "prometheus", [], _rule_files(CLUSTER_CONFIG),
                                  _retargeted(CLUSTER_CONFIG, where))
    try:
        _healthy(prometheus, {"folio-broker": defaults.brokers,
                              "folio-bookie": defaults.bookies})
    finally:
        prometheus.stop()
