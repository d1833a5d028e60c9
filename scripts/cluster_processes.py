"""The processes of the local cluster (``scripts/cluster.py``): start, record, find again.

Each process is started in its own session (it outlives the script) and
recorded in ``pids`` as ``NAME PID START_TIME``: the start time (clock ticks
since boot) tells a pid the system reused from the process it was.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
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
