"""The processes of the local cluster (``scripts/cluster.py``): start, record, find again.

Each process is started in its own session (it outlives the script) and
recorded in ``pids`` as ``NAME PID START_TIME``: the start time (clock ticks
since boot) tells a pid the system reused from the process it was.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Deadline for one process to print its ready line.
START_TIMEOUT_S = 90.0


@dataclass
class Started:
    """One process of the cluster: its role, name and pid."""

    name: str
    pid: int
    address: str


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (exited, not reaped by its parent) counts as gone.
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state != "Z"


def start_time(pid: int) -> str:
    """The process's start time in clock ticks since boot ('' if gone): tells a reused pid."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def read_pids(directory: Path) -> list[tuple[str, int]]:
    """The processes ``pids`` lists that are still the very processes started (not reused)."""
    path = directory / "pids"
    if not path.exists():
        return []
    entries = []
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1].isdigit():
            name, pid, started = parts[0], int(parts[1]), parts[2]
            if alive(pid) and start_time(pid) == started:
                entries.append((name, pid))
    return entries


def wait_ready(name: str, process: subprocess.Popen[bytes], out_path: Path,
                log_path: Path) -> str:
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        text = out_path.read_text(errors="replace") if out_path.exists() else ""
        if "\n" in text:
            return text.split("\n", 1)[0]
        if process.poll() is not None:
            log = log_path.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"{name} exited with {process.returncode}; its log:\n{log}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{name} printed no ready line within {START_TIMEOUT_S} s; "
                               f"see {log_path}")
        threading.Event().wait(0.1)


def start(directory: Path, name: str, args: list[str]) -> Started:
    out_path, log_path = directory / f"{name}.out", directory / f"{name}.log"
    with out_path.open("wb") as out, log_path.open("ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "folio.cli", *args], stdin=subprocess.DEVNULL,
            stdout=out, stderr=log, cwd=ROOT, start_new_session=True)
    line = wait_ready(name, process, out_path, log_path)
    address = line.split(" listening on ", 1)[1].split(" ", 1)[0]
    return Started(name, process.pid, address)


def record(directory: Path, started: Started) -> None:
    with (directory / "pids").open("a") as pids:
        pids.write(f"{started.name} {started.pid} {start_time(started.pid)}\n")


def forget(directory: Path, name: str) -> None:
    """Drops ``name``'s line from ``pids`` (it was stopped, or is started again)."""
    path = directory / "pids"
    if not path.exists():
        return
    kept = [line for line in path.read_text().splitlines()
            if line.split(" ", 1)[0] != name]
    path.write_text("".join(f"{line}\n" for line in kept))


def stop(entries: list[tuple[str, int]], timeout_s: float,
         warn: Callable[[str], None]) -> None:
    """SIGTERM ``entries`` together, wait up to ``timeout_s``, then SIGKILL what still runs."""
    for _name, pid in entries:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while any(alive(pid) for _, pid in entries) and time.monotonic() < deadline:
        threading.Event().wait(0.1)
    for name, pid in entries:
        if alive(pid):
            warn(f"cluster: {name} (pid {pid}) still running {timeout_s:g} s after "
                 "SIGTERM: SIGKILL")
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


#: The file recording how each process of the cluster is started (``up`` writes it).
LAYOUT_FILE = "cluster.json"


@dataclass
class Layout:
    """How the cluster's processes start: ZooKeeper's port and each folio command.

    ``commands`` maps each name (``bookie-1``, ``broker-2`` ...) to its
    ``folio`` arguments, in start order (bookies before brokers); ZooKeeper,
    always first, is started from ``zk_port``.
    """

    metadata_url: str
    zk_port: int
    commands: dict[str, list[str]]

    @property
    def names(self) -> list[str]:
        """Every process, in start order."""
        return ["zookeeper", *self.commands]

    def save(self, directory: Path) -> None:
        (directory / LAYOUT_FILE).write_text(json.dumps(
            {"metadata_url": self.metadata_url, "zk_port": self.zk_port,
             "commands": self.commands}, indent=2) + "\n")

    @classmethod
    def load(cls, directory: Path) -> Layout | None:
        """The recorded layout, None when ``up`` never wrote one (or it is unreadable)."""
        try:
            fields = json.loads((directory / LAYOUT_FILE).read_text())
            return cls(str(fields["metadata_url"]), int(fields["zk_port"]),
                       {str(k): [str(a) for a in v] for k, v in fields["commands"].items()})
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None


def ready_address(directory: Path, name: str) -> str:
    """The address ``name``'s last ready line named ('' if none)."""
    try:
        line = (directory / f"{name}.out").read_text(errors="replace").split("\n", 1)[0]
    except OSError:
        return ""
    return line.split(" listening on ", 1)[1].split(" ", 1)[0] if " listening on " in line \
        else ""
