"""A real Prometheus for tests: started on a free loopback port, queried over its HTTP API."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tests.support.zookeeper import free_port

__all__ = ["PROMETHEUS_MISSING", "PrometheusServer", "prometheus_path"]

#: The skip reason (and the Makefile's line) when the binary is missing.
PROMETHEUS_MISSING = ("prometheus is not on PATH (Debian package `prometheus`, which .ci/run "
                      "installs): the real-Prometheus test is skipped")

_START_TIMEOUT_S = 60.0


def prometheus_path() -> str | None:
    """The ``prometheus`` binary, or None."""
    return shutil.which("prometheus")


def _free_port() -> int:
    # Prometheus cannot report a port it chose itself, so it is told one
    # (scripts/free_ports.py: below the ephemeral range, this worker's slice).
    return free_port()


class PrometheusServer:
    """``prometheus`` scraping ``targets`` every second, with ``rule_files`` loaded.

    Args:
        workdir: where its config, data and log go.
        targets: ``host:port`` of ``/metrics`` endpoints (job ``folio``).
        rule_files: alert rule files to load (evaluated every second).
        scrape_configs: Prometheus ``scrape_configs`` to use instead of the one
            job ``folio`` of ``targets`` (e.g. a shipped config's, retargeted).
    """

    def __init__(self, workdir: Path, targets: Sequence[str],
                 rule_files: Sequence[Path] = (),
                 scrape_configs: Sequence[dict[str, Any]] | None = None) -> None:
        binary = prometheus_path()
        if binary is None:
            raise RuntimeError(PROMETHEUS_MISSING)
        workdir.mkdir(parents=True, exist_ok=True)
        config = workdir / "prometheus.yml"
        # JSON is YAML: no YAML library needed to write the config.
        config.write_text(json.dumps({
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s",
                       "scrape_timeout": "1s"},
            "rule_files": [str(path) for path in rule_files],
            "scrape_configs": list(scrape_configs) if scrape_configs is not None else [
                {"job_name": "folio", "static_configs": [{"targets": list(targets)}]}],
        }))
        self.port = _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log_path = workdir / "prometheus.log"
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [binary, f"--config.file={config}", f"--storage.tsdb.path={workdir / 'data'}",
                 f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + _START_TIMEOUT_S
        while True:
            if self.process.poll() is not None:
                raise AssertionError(f"prometheus exited with {self.process.returncode}:\n"
                                     f"{self.log()}")
            try:
                with urllib.request.urlopen(f"{self.base}/-/ready", timeout=2) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"prometheus not ready in {_START_TIMEOUT_S} s:\n"
                                     f"{self.log()}")
            threading.Event().wait(0.1)

    def log(self) -> str:
        """What prometheus logged."""
        return self.log_path.read_text(errors="replace")

    def api(self, path: str, **params: str) -> Any:
        """GET ``/api/v1/<path>`` and return its ``data`` (fails unless status is success)."""
        query = urllib.parse.urlencode(params)
        with urllib.request.urlopen(f"{self.base}/api/v1/{path}?{query}", timeout=10) as response:
            body = json.loads(response.read())
        if body.get("status") != "success":
            raise AssertionError(f"{path} {params}: {body}")
        return body["data"]

    def query(self, promql: str) -> list[tuple[dict[str, str], float]]:
        """An instant query: each series' labels and value (NaN stays NaN)."""
        data = self.api("query", query=promql)
        return [(series["metric"], float(series["value"][1])) for series in data["result"]]

    def scalar(self, promql: str) -> float | None:
        """The value of a query answering one series; None for an empty answer."""
        result = self.query(promql)
        if not result:
            return None
        if len(result) != 1:
            raise AssertionError(f"{promql} answered {len(result)} series: {result}")
        return result[0][1]

    def wait_for(self, condition: Callable[[], bool], what: str,
                 timeout_s: float = 60.0) -> None:
        """Poll ``condition`` (it queries this server) until true, or fail after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(f"not within {timeout_s} s: {what}; prometheus log:\n"
                                     f"{self.log()[-4000:]}")
            threading.Event().wait(0.2)

    def stop(self) -> None:
        """SIGTERM, wait (SIGKILL after 30 s)."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
