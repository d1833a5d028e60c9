"""Start a real ``folio standalone`` for a benchmark and learn its endpoint (and metrics)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

__all__ = ["start_standalone", "start_standalone_with_metrics"]


def start_standalone_with_metrics(directory: Path, *args: str
                                  ) -> tuple[subprocess.Popen[str], str, str]:
    """``folio standalone`` on ``directory`` (free ports) with ``args``; the process,
    ``host:port`` and its ``/metrics`` URL (from the ready line).

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
    # "... (data in DIR, metrics on http://HOST:PORT/metrics)"
    metrics_url = line.split("metrics on ", 1)[1].split(")")[0].split(",")[0].strip() \
        if "metrics on " in line else ""
    return process, line.split("listening on ", 1)[1].split()[0], metrics_url


def start_standalone(directory: Path, *args: str) -> tuple[subprocess.Popen[str], str]:
    """``folio standalone`` on ``directory`` (free ports) with ``args``; the process and
    ``host:port``.

    The caller stops it (``terminate()`` then ``wait()``).
    """
    process, endpoint, _ = start_standalone_with_metrics(directory, *args)
    return process, endpoint
