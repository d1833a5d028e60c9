"""Start and stop the peers' servers for ``bench.peers``: nats-server and redis-server.

Each runs on loopback in its own data directory, configured for the durable
mode the benchmark compares: ``nats-server -js`` with file storage, and
``redis-server`` with ``appendonly yes`` and ``appendfsync always``. A start
waits for the server's own ready line (with a deadline), not for a timer.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import threading
import time
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import IO

__all__ = ["Server", "missing_peers", "nats_server", "redis_server"]

START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 30.0


class Server:
    """A started server process, its ``host:port`` and its version string."""

    def __init__(self, process: subprocess.Popen[str], address: str, version: str) -> None:
        self.process = process
        self.address = address
        self.version = version
        #: Its Prometheus ``/metrics`` URL, when it serves one (Folio: the latency budget).
        self.metrics_url = ""
        #: The server's last output lines (a thread drains the pipe so it never fills).
        self.log: deque[str] = deque(maxlen=50)
        self._drain = threading.Thread(target=self._read_output, daemon=True)
        self._drain.start()

    def _read_output(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.log.append(line)

    @property
    def port(self) -> int:
        """The TCP port it listens on."""
        return int(self.address.rsplit(":", 1)[1])

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it has not exited within ``STOP_TIMEOUT_S``."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._drain.join(STOP_TIMEOUT_S)


def missing_peers() -> list[str]:
    """The peer programs not on PATH (``.ci/run`` installs them)."""
    return [name for name in ("nats-server", "redis-server", "redis-benchmark")
            if shutil.which(name) is None]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _wait_for_line(process: subprocess.Popen[str], marker: str, name: str) -> list[str]:
    """Lines of the server's output up to the one containing ``marker``."""
    assert process.stdout is not None
    stream: IO[str] = process.stdout
    lines: list[str] = []
    deadline = time.monotonic() + START_TIMEOUT_S
    # readline blocks until the server writes: the deadline is checked per line, and
    # a server that dies ends the output (empty readline).
    while time.monotonic() < deadline:
        line = stream.readline()
        if not line:
            break
        lines.append(line)
        if marker in line:
            return lines
    process.kill()
    process.wait()
    raise RuntimeError(f"{name} did not start: {''.join(lines[-5:])!r}")


def _version(argv: list[str]) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=30)
    # "nats-server: v2.9.10"; "Redis server v=7.0.15 sha=... malloc=..." (first two words)
    return " ".join((done.stdout or done.stderr).split()[:3 if "Redis" in done.stdout else 2])


@contextlib.contextmanager
def nats_server(directory: Path) -> Iterator[Server]:
    """``nats-server -js`` (file storage in ``directory``) on a free loopback port."""
    directory.mkdir(parents=True, exist_ok=True)
    process = subprocess.Popen(
        ["nats-server", "-js", "-a", "127.0.0.1", "-p", "-1", "-sd", str(directory)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = _wait_for_line(process, "Server is ready", "nats-server")
    listening = next(line for line in lines if "Listening for client connections on" in line)
    address = listening.rsplit(" ", 1)[1].strip()
    server = Server(process, address, _version(["nats-server", "--version"]))
    try:
        yield server
    finally:
        server.stop()


@contextlib.contextmanager
def redis_server(directory: Path) -> Iterator[Server]:
    """``redis-server`` with ``appendonly yes``, ``appendfsync always`` on a free port."""
    directory.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    process = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", str(directory),
         "--appendonly", "yes", "--appendfsync", "always", "--save", "",
         "--daemonize", "no", "--logfile", "", "--loglevel", "notice"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    _wait_for_line(process, "Ready to accept connections", "redis-server")
    server = Server(process, f"127.0.0.1:{port}", _version(["redis-server", "--version"]))
    try:
        yield server
    finally:
        server.stop()
