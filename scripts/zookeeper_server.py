"""Run a real ZooKeeper server (Debian's ``zookeeper`` package) with a config of its own.

Used by the tests (``tests/support/zookeeper.py``) and by ``make cluster``
(``scripts/cluster.py``); never by Folio itself, which only speaks to a
ZooKeeper ensemble given by ``--metadata-url``. The server runs in the
foreground of its own process (``QuorumPeerMain`` on a standalone config), no
systemd and nothing under /etc or /var: its config, data and log live in one
directory::

    server = ZooKeeperServer(Path("/tmp/zk"))
    server.start()            # waits until it answers ``ruok`` with ``imok``
    server.address            # "127.0.0.1:PORT"
    server.restart()          # same port, same data dir (SIGTERM, then start)
    server.stop()             # SIGTERM, SIGKILL after a deadline

Every wait has a deadline; a server that does not come up raises
``ZooKeeperStartError`` quoting its log. The jar is ``$FOLIO_ZOOKEEPER_JAR``
or Debian's ``/usr/share/java/zookeeper.jar`` (its manifest names the
dependencies); ``java`` comes from ``$JAVA`` or ``PATH``.

``python scripts/zookeeper_server.py DIR [--port N]`` runs one in the
foreground until SIGTERM or Ctrl-C.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from free_ports import free_port

__all__ = [
    "DEFAULT_JAR",
    "START_TIMEOUT_S",
    "STOP_TIMEOUT_S",
    "ZooKeeperServer",
    "ZooKeeperStartError",
    "four_letter_word",
    "free_port",
]

#: Debian's server jar; its manifest's Class-Path names every dependency.
DEFAULT_JAR = "/usr/share/java/zookeeper.jar"
#: Deadline for the JVM to start and answer ``ruok`` (a loaded 2-core machine is slow).
START_TIMEOUT_S = 90.0
#: Deadline for the server to exit after SIGTERM before it gets SIGKILL.
STOP_TIMEOUT_S = 20.0
_MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
_SLF4J_SIMPLE = "/usr/share/java/slf4j-simple.jar"


class ZooKeeperStartError(RuntimeError):
    """The server could not be started, or did not answer in time."""


def four_letter_word(host: str, port: int, word: str, timeout_s: float = 2.0) -> str:
    """Send a four-letter command (``ruok``, ``srvr``) and return the answer ('' on failure)."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as sock:
            sock.sendall(word.encode())
            chunks = []
            while True:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                chunks.append(chunk)
            return b"".join(chunks).decode(errors="replace")
    except OSError:
        return ""


class ZooKeeperServer:
    """One standalone ZooKeeper server process with its config, data and log under ``base_dir``.

    Args:
        base_dir: holds ``zoo.cfg``, ``data/`` and ``zookeeper.log``; created if missing.
        port: the client port; 0 picks a free one once, kept across restarts.
        host: the address it listens on (loopback by default).
        tick_time_ms: ZooKeeper's tick; sessions may last 2 to 20 ticks by default,
            here 2 ticks to ``max_session_timeout_ms``.
        max_session_timeout_ms: the longest session timeout a client may ask for.
        heap_mb: the JVM's maximum heap.
    """

    def __init__(self, base_dir: Path, *, port: int = 0, host: str = "127.0.0.1",
                 tick_time_ms: int = 500, max_session_timeout_ms: int = 60_000,
                 heap_mb: int = 256) -> None:
        self.base_dir = Path(base_dir)
        self.host = host
        self.port = port or free_port(host)
        self.tick_time_ms = tick_time_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self.heap_mb = heap_mb
        self.process: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()

    @property
    def address(self) -> str:
        """``host:port``, the connect string of this one-server ensemble."""
        return f"{self.host}:{self.port}"

    @property
    def data_dir(self) -> Path:
        """The server's snapshots and transaction logs."""
        return self.base_dir / "data"

    @property
    def log_path(self) -> Path:
        """The server's stdout and stderr."""
        return self.base_dir / "zookeeper.log"

    @property
    def config_path(self) -> Path:
        """The server's ``zoo.cfg``."""
        return self.base_dir / "zoo.cfg"

    def url(self, chroot: str = "") -> str:
        """``zk://host:port/chroot``: a ``--metadata-url`` for this server."""
        return f"zk://{self.address}{chroot}"

    def log(self) -> str:
        """What the server wrote so far."""
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def running(self) -> bool:
        """Whether the process was started and has not exited."""
        return self.process is not None and self.process.poll() is None

    def _write_config(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(
            "# Written by scripts/zookeeper_server.py: one standalone server.\n"
            f"tickTime={self.tick_time_ms}\n"
            f"dataDir={self.data_dir}\n"
            f"clientPort={self.port}\n"
            f"clientPortAddress={self.host}\n"
            f"minSessionTimeout={2 * self.tick_time_ms}\n"
            f"maxSessionTimeout={self.max_session_timeout_ms}\n"
            # No Jetty admin server on port 8080 (it would collide between servers).
            "admin.enableServer=false\n"
            "4lw.commands.whitelist=ruok,srvr,mntr,cons\n"
            # Old snapshots and logs are purged, so a long-lived local cluster stays small.
            "autopurge.snapRetainCount=3\n"
            "autopurge.purgeInterval=1\n"
        )

    def _command(self) -> list[str]:
        java = os.environ.get("JAVA") or shutil.which("java")
        if not java:
            raise ZooKeeperStartError(
                "java is not on PATH: install Debian's zookeeper package (.ci/run does)")
        jar = os.environ.get("FOLIO_ZOOKEEPER_JAR") or DEFAULT_JAR
        if not Path(jar).is_file():
            raise ZooKeeperStartError(
                f"no ZooKeeper jar at {jar}: apt-get install zookeeper (.ci/run does), "
                "or set FOLIO_ZOOKEEPER_JAR")
        # Debian's libslf4j-java (a dependency of zookeeper) ships slf4j-simple: with
        # it on the class path the server logs to stderr (our log file); without a
        # binding slf4j drops every line.
        classpath = [jar, *(binding for binding in [_SLF4J_SIMPLE] if Path(binding).is_file())]
        return [java, f"-Xmx{self.heap_mb}m", "-XX:+UseSerialGC",
                "-Dzookeeper.admin.enableServer=false",
                "-Dorg.slf4j.simpleLogger.showDateTime=true",
                "-Dorg.slf4j.simpleLogger.dateTimeFormat=yyyy-MM-dd HH:mm:ss,SSS",
                "-cp", os.pathsep.join(classpath), _MAIN_CLASS, str(self.config_path)]

    def start(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Start the server and wait until it answers ``ruok`` with ``imok``.

        Raises:
            ZooKeeperStartError: no java or jar, the process exited, or no answer
                within ``timeout_s`` (the process is killed first); the message
                quotes the server's log.
        """
        with self._lock:
            if self.running():
                return
            self.base_dir.mkdir(parents=True, exist_ok=True)
            self._write_config()
            command = self._command()
            with self.log_path.open("ab") as log:
                self.process = subprocess.Popen(
                    command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                    cwd=self.base_dir, start_new_session=True,
                )
            deadline = time.monotonic() + timeout_s
            while four_letter_word(self.host, self.port, "ruok") != "imok":
                if self.process.poll() is not None:
                    code = self.process.returncode
                    self.process = None
                    raise ZooKeeperStartError(
                        f"ZooKeeper on {self.address} exited with {code}; log:\n{self.log()}")
                if time.monotonic() > deadline:
                    self._kill_locked()
                    raise ZooKeeperStartError(
                        f"ZooKeeper on {self.address} did not answer ruok within {timeout_s} s;"
                        f" log:\n{self.log()}")
                threading.Event().wait(0.05)

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """SIGTERM the server, SIGKILL it if still alive after ``timeout_s``; reap it."""
        with self._lock:
            process = self.process
            if process is None:
                return
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout_s)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
            self.process = None

    def kill(self) -> None:
        """SIGKILL the server (a crash) and reap it."""
        with self._lock:
            self._kill_locked()

    def _kill_locked(self) -> None:
        if self.process is not None:
            if self.process.poll() is None:
                self.process.kill()
            self.process.wait()
            self.process = None

    def restart(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Stop the server and start it again on the same port and data dir."""
        self.stop()
        self.start(timeout_s)


def main(argv: list[str] | None = None) -> int:
    """Run one server in the foreground until SIGTERM or SIGINT."""
    parser = argparse.ArgumentParser(description="Run a standalone ZooKeeper server.")
    parser.add_argument("dir", type=Path, help="directory of its config, data and log")
    parser.add_argument("--port", type=int, default=2181, help="client port (default 2181)")
    parser.add_argument("--tick-time-ms", type=int, default=2000)
    args = parser.parse_args(argv)
    server = ZooKeeperServer(args.dir, port=args.port, tick_time_ms=args.tick_time_ms)
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    signal.signal(signal.SIGINT, lambda *_: stopped.set())
    try:
        server.start()
    except ZooKeeperStartError as error:
        print(f"zookeeper_server: {error}", file=sys.stderr)
        return 1
    print(f"zookeeper listening on {server.address}", flush=True)
    while not stopped.wait(1.0):
        if not server.running():
            print(f"zookeeper exited; log: {server.log_path}", file=sys.stderr)
            return 1
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
