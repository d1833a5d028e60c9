"""A Folio cluster of real processes for tests: ``folio cluster init``, bookies and brokers.

On top of a real ZooKeeper (``tests/support/zookeeper.py``: the ``zk_url``
chroot, or a dedicated server) and ``BookieProcesses`` (each process's ready
line waited for with a deadline, its log quoted on failure, SIGKILLed at
teardown)::

    cluster = LocalCluster(bookie_processes, zk_url, tmp_path)
    cluster.init(ensemble_size=3, write_quorum=2, ack_quorum=2)
    bookies = [cluster.start_bookie() for _ in range(3)]
    broker = cluster.start_broker()
    with folio.Client(broker.address) as client: ...

Every process asks for ``SESSION_TIMEOUT_MS`` (short, so that a killed
process's registration vanishes quickly) unless told otherwise.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.support.bookies import BookieProcess, BookieProcesses, run_folio

__all__ = ["SESSION_TIMEOUT_MS", "LocalCluster"]

#: ZooKeeper session timeout of the test processes (the test server allows 1 s to 60 s).
SESSION_TIMEOUT_MS = 2_000


class LocalCluster:
    """Cluster processes on loopback, all on one metadata URL.

    Args:
        processes: where started processes are remembered (killed at teardown).
        url: the metadata URL (``zk://HOST:PORT/CHROOT``).
        base: a directory for the bookies' data and every process's log.
    """

    def __init__(self, processes: BookieProcesses, url: str, base: Path) -> None:
        self.processes = processes
        self.url = url
        self.base = base
        self._bookies = 0
        self._brokers = 0

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``folio ARGS`` to completion (e.g. ``cluster describe``)."""
        return run_folio(*args)

    def init(self, *, container_count: int = 16, ensemble_size: int = 3,
             write_quorum: int = 2, ack_quorum: int = 2) -> subprocess.CompletedProcess[str]:
        """``folio cluster init`` on the URL; fails the test unless it exits 0."""
        done = run_folio("cluster", "init", "--metadata-url", self.url,
                         "--container-count", str(container_count),
                         "--ensemble-size", str(ensemble_size),
                         "--write-quorum", str(write_quorum), "--ack-quorum", str(ack_quorum))
        assert done.returncode == 0, done.stderr
        return done

    def start_bookie(self, *args: str, data_dir: Path | None = None,
                     session_timeout_ms: int = SESSION_TIMEOUT_MS) -> BookieProcess:
        """``folio bookie --metadata-url URL`` on a free port, data in ``base/bookie-N``."""
        if data_dir is None:
            self._bookies += 1
            data_dir = self.base / f"bookie-{self._bookies}"
        return self.processes.start(
            data_dir, "--metadata-url", self.url, "--durability", "async",
            "--metadata-session-timeout-ms", str(session_timeout_ms), *args)

    def start_broker(self, *args: str, session_timeout_ms: int = SESSION_TIMEOUT_MS,
                     name: str | None = None) -> BookieProcess:
        """``folio broker --metadata-url URL`` on free ports; its log in ``base/NAME.log``."""
        if name is None:
            self._brokers += 1
            name = f"broker-{self._brokers}"
        return self.processes.start_folio(
            ["broker", "--metadata-url", self.url, "--port", "0", "--metrics-port", "0",
             "--metadata-session-timeout-ms", str(session_timeout_ms), *args],
            self.base / name)
