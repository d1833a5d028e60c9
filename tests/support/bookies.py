"""Bookie processes for tests: start ``folio bookie`` for real, learn its port, stop or kill it.

Every wait has a deadline and none sleeps: the port comes from the one line
the process prints once it serves (``folio bookie listening on HOST:PORT
...``), read with ``selectors`` until that deadline. The process's stderr (its
log) goes to a file next to the data dir, quoted in every failure.

Typical use, through the ``bookie_processes`` fixture of ``tests/conftest.py``::

    bookie = bookie_processes.start(tmp_path / "b0", "--durability", "sync")
    client = GrpcBookieClient(bookie.address)
    ...
    bookie.kill()                                  # SIGKILL, reaped
    bookie = bookie_processes.start(bookie.data_dir)  # same data, new port
"""

from __future__ import annotations

import contextlib
import os
import re
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "START_TIMEOUT_S",
    "STOP_TIMEOUT_S",
    "BookieProcess",
    "BookieProcesses",
    "folio_argv",
    "folio_env",
    "run_folio",
    "start_bookie_process",
    "start_folio_process",
    "wait_for_ready_line",
]

#: Deadline for a process to print its ready line.
START_TIMEOUT_S = 30.0
#: Deadline for a process to exit once signalled.
STOP_TIMEOUT_S = 30.0

_LISTENING = re.compile(r"listening on (?P<host>\S+):(?P<port>\d+)\b")


#: The repository root, so that ``python -m tests.support.<launcher>`` imports.
_ROOT = Path(__file__).resolve().parents[2]


def folio_argv(*args: str, module: str = "folio.cli") -> list[str]:
    """The command line of ``folio ARGS`` with this interpreter (no PATH needed).

    ``module``: another entry module taking the same arguments (a test's own
    launcher, e.g. ``tests.support.crash_after_committing``).
    """
    return [sys.executable, "-m", module, *args]


def folio_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment without ``FOLIO_*`` settings, plus ``env``.

    Dropping the caller's ``FOLIO_*`` variables keeps a developer's shell
    settings out of the tests; pass the ones a test is about in ``env``.
    """
    base = {key: value for key, value in os.environ.items() if not key.startswith("FOLIO_")}
    return {**base, **(env or {})}


def run_folio(*args: str, env: Mapping[str, str] | None = None,
              timeout_s: float = START_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    """Run ``folio ARGS`` to completion, capturing stdout and stderr as text."""
    return subprocess.run(
        folio_argv(*args), env=folio_env(env), capture_output=True, text=True,
        timeout=timeout_s, check=False,
    )


@dataclass
class BookieProcess:
    """A running ``folio`` server process that printed its ready line.

    Attributes:
        process: the process; its stdout is a pipe, its stderr ``log_path``.
        data_dir: the data dir it was started on.
        log_path: file holding the process's stderr.
        host: host from the ready line.
        port: port from the ready line (the bound one, when started with 0).
        ready_line: the ready line, without its newline.
    """

    process: subprocess.Popen[bytes]
    data_dir: Path
    log_path: Path
    host: str
    port: int
    ready_line: str

    @property
    def address(self) -> str:
        """``host:port``, as ``GrpcBookieClient`` takes it."""
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int:
        """The process id."""
        return self.process.pid

    def running(self) -> bool:
        """Whether the process has not exited yet."""
        return self.process.poll() is None

    def log(self) -> str:
        """What the process wrote to stderr so far."""
        return self.log_path.read_text(errors="replace")

    def kill(self, timeout_s: float = STOP_TIMEOUT_S) -> int:
        """SIGKILL the process (a crash: nothing is flushed), reap it, return its exit code."""
        return self._signal(signal.SIGKILL, timeout_s)

    def terminate(self, timeout_s: float = STOP_TIMEOUT_S) -> int:
        """SIGTERM the process (a clean stop), wait for it, return its exit code."""
        return self._signal(signal.SIGTERM, timeout_s)

    def interrupt(self, timeout_s: float = STOP_TIMEOUT_S) -> int:
        """SIGINT the process (Ctrl-C), wait for it, return its exit code."""
        return self._signal(signal.SIGINT, timeout_s)

    def _signal(self, signum: signal.Signals, timeout_s: float) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signum)
        try:
            code = self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            # Its stacks into the log first (ledger.stack_dump), to see what it waits on.
            self.process.send_signal(signal.SIGUSR2)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(2)
            self.process.kill()
            self.process.wait()
            raise AssertionError(
                f"pid {self.pid} did not exit {timeout_s} s after {signum.name}; "
                f"log:\n{self.log()}"
            ) from None
        finally:
            self._close_pipes()
        return code

    def _close_pipes(self) -> None:
        if self.process.stdout is not None:
            self.process.stdout.close()


def wait_for_ready_line(process: subprocess.Popen[bytes], timeout_s: float,
                        log_path: Path | None = None) -> str:
    """The first line ``process`` prints to stdout, read with a deadline.

    Raises:
        AssertionError: the process exited first, or the deadline passed
            (the process is left running: the caller kills it).
    """
    stdout = process.stdout
    if stdout is None:
        raise ValueError("the process's stdout must be a pipe")

    def failure(what: str) -> AssertionError:
        log = log_path.read_text(errors="replace") if log_path is not None else ""
        return AssertionError(f"{what}; log:\n{log}")

    deadline = time.monotonic() + timeout_s
    buffer = b""
    with selectors.DefaultSelector() as selector:
        selector.register(stdout, selectors.EVENT_READ)
        while b"\n" not in buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise failure(f"pid {process.pid} printed no line within {timeout_s} s")
            if not selector.select(remaining):
                continue
            chunk = os.read(stdout.fileno(), 65536)
            if not chunk:
                code = process.wait(STOP_TIMEOUT_S)
                raise failure(f"pid {process.pid} exited with {code} before its ready line "
                              f"(stdout {buffer!r})")
            buffer += chunk
    return buffer.split(b"\n", 1)[0].decode()


def start_folio_process(args: Sequence[str], data_dir: Path, *,
                        env: Mapping[str, str] | None = None,
                        timeout_s: float = START_TIMEOUT_S,
                        module: str = "folio.cli") -> BookieProcess:
    """Start ``folio ARGS`` and wait for its ``... listening on HOST:PORT ...`` line.

    Args:
        args: the ``folio`` arguments, e.g. ``["bookie", "--data-dir", ...]``.
        data_dir: the data dir the process uses; its log goes to ``<data_dir>.log``.
        env: extra environment (``FOLIO_*`` of the caller's are dropped).
        timeout_s: deadline for the ready line.
        module: the entry module (``folio_argv``); a test launcher under
            ``tests.support`` is found from the repository root.

    Raises:
        AssertionError: no ready line in time (the process is killed first).
    """
    if module != "folio.cli":
        path = os.pathsep.join(p for p in (str(_ROOT), os.environ.get("PYTHONPATH")) if p)
        env = {**(env or {}), "PYTHONPATH": path}
    log_path = data_dir.with_name(data_dir.name + ".log")
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            folio_argv(*args, module=module), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=log, env=folio_env(env), bufsize=0,
        )
    try:
        line = wait_for_ready_line(process, timeout_s, log_path)
        match = _LISTENING.search(line)
        if match is None:
            raise AssertionError(f"unexpected ready line {line!r}")
    except BaseException:
        process.kill()
        process.wait()
        if process.stdout is not None:
            process.stdout.close()
        raise
    return BookieProcess(process, data_dir, log_path, match["host"], int(match["port"]), line)


def start_bookie_process(data_dir: Path, *args: str, port: int = 0,
                         env: Mapping[str, str] | None = None,
                         timeout_s: float = START_TIMEOUT_S) -> BookieProcess:
    """Start ``folio bookie --data-dir DATA_DIR --port PORT ARGS`` and wait until it serves.

    Its metrics are on a free port (``--metrics-port 0``; ARGS may set another).

    Args:
        data_dir: the bookie's data dir (created by the bookie if missing).
        *args: more ``folio bookie`` flags, e.g. ``"--durability", "async"``.
        port: the port to ask for; 0 (any free one) by default.
        env: extra environment.
        timeout_s: deadline for the ready line.
    """
    argv = ["bookie", "--data-dir", str(data_dir), "--port", str(port), "--metrics-port", "0",
            *args]
    return start_folio_process(argv, data_dir, env=env, timeout_s=timeout_s)


@dataclass
class BookieProcesses:
    """Bookie processes started by one test; ``kill_all`` reaps every one still running."""

    started: list[BookieProcess] = field(default_factory=list)

    def start(self, data_dir: Path, *args: str, port: int = 0,
              env: Mapping[str, str] | None = None,
              timeout_s: float = START_TIMEOUT_S) -> BookieProcess:
        """``start_bookie_process``, remembered for cleanup."""
        bookie = start_bookie_process(data_dir, *args, port=port, env=env, timeout_s=timeout_s)
        self.started.append(bookie)
        return bookie

    def start_folio(self, args: Sequence[str], data_dir: Path, *,
                    env: Mapping[str, str] | None = None,
                    timeout_s: float = START_TIMEOUT_S,
                    module: str = "folio.cli") -> BookieProcess:
        """``start_folio_process`` (e.g. ``folio standalone``), remembered for cleanup."""
        started = start_folio_process(args, data_dir, env=env, timeout_s=timeout_s,
                                      module=module)
        self.started.append(started)
        return started

    def kill_all(self) -> None:
        """SIGKILL and reap every process still running; close every pipe."""
        for bookie in self.started:
            bookie.kill()
