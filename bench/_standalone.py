"""Start a real ``folio standalone`` for a benchmark and learn its endpoint."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

__all__ = ["start_standalone"]


def start_standalone(directory: Path, *args: str) -> tuple[subprocess.Popen[str], str]:
    """``folio standalone`` on ``directory`` (free ports) with ``args``; the process and
    ``host:port``.

    The caller stops it (``terminate()`` then ``wait()``).
    """
    process = subprocess.Popen(
        [sys.executable, "-m", "folio.cli", "standalone", "--data-dir", str(directory),
         "--port", "0", "--metrics-port", "0", *args],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert process.stdout is not None
    line = process.stdout.readline()
    if "listening on " not in line:
        process.kill()
        process.wait()
        raise RuntimeError(f"folio standalone did not start: {line!r}")
    return process, line.split("listening on ", 1)[1].split()[0]
