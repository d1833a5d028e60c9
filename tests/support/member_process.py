"""A reader group member in a process of its own (``tests.support.group_member``), seen from a test.

``MemberProcess(tmp, endpoint, group, topic, reader_id)`` starts the member;
``joined`` says it is in the group, ``events()`` gives the payloads it
printed and ``reads()`` each event as ``(payload, segment, offset)``, in the
order the member processed them. ``stop(SIGKILL)`` crashes it, ``stop(SIGTERM)``
makes it leave cleanly; ``log()`` is its stderr (a member declared offline while
alive writes ``rejoining`` there before joining again).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO

from tests.support.bookies import folio_env

__all__ = ["MemberProcess", "OutputLines"]

_REPO = Path(__file__).resolve().parents[2]


class OutputLines:
    """Collects a process's stdout lines on a thread."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.lines: list[str] = []
        self._thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self._thread.start()

    def _pump(self, stream: IO[bytes]) -> None:
        with stream:
            for line in stream:
                self.lines.append(line.decode().rstrip("\n"))

    def join(self) -> None:
        self._thread.join(30)


class MemberProcess:
    """A group member process (``python -m tests.support.group_member``)."""

    def __init__(self, tmp: Path, endpoint: str, group: str, topic: str, reader_id: str,
                 timeout_ms: int) -> None:
        self.reader_id = reader_id
        self.log_path = tmp / f"{reader_id}-{id(self)}.log"
        with self.log_path.open("wb") as stderr:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "tests.support.group_member", endpoint, group, topic,
                 reader_id, str(timeout_ms)],
                cwd=_REPO, env=folio_env(), stdout=subprocess.PIPE, stderr=stderr)
        assert self.process.stdout is not None
        self.out = OutputLines(self.process.stdout)

    @property
    def joined(self) -> bool:
        assert self.process.poll() is None, self.log()
        return "joined" in self.out.lines[:1]

    def log(self) -> str:
        """What the member wrote to stderr so far."""
        return self.log_path.read_text(errors="replace")

    def reads(self) -> list[tuple[str, str, int]]:
        """``(payload, segment, offset)`` of every event printed, in order."""
        found = []
        for line in list(self.out.lines):
            if line != "joined":
                payload, segment, offset = line.split("\t")
                found.append((payload, segment, int(offset)))
        return found

    def events(self) -> list[str]:
        """The payloads printed, in order."""
        return [payload for payload, _, _ in self.reads()]

    def stop(self, signum: signal.Signals) -> int:
        self.process.send_signal(signum)
        code = self.process.wait(30)
        self.out.join()
        return code

    def reap(self) -> None:
        """SIGKILL the member if it still runs (a test's cleanup)."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(30)
        self.out.join()
