"""Count a server's sync system calls under load with ``strace -c``, for ``bench.peers``.

``count_syncs(pid, load)`` attaches ``strace -f -c`` (every thread) to the
running server, counting only ``fsync``, ``fdatasync``, ``sync_file_range``,
``syncfs``, ``sync`` and ``msync``; runs ``load`` (which returns how many
events it had acknowledged); detaches; and returns the calls per 1,000
acknowledged events. Tracing slows those calls down, so the probe runs apart
from the timed runs. Without strace (or without permission to trace) it
returns None and the report quotes the durability instead of measuring it.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["SYNC_CALLS", "count_syncs"]

SYNC_CALLS = ("fsync", "fdatasync", "sync_file_range", "syncfs", "sync", "msync")


def _parse_summary(text: str) -> dict[str, int]:
    """``{syscall: calls}`` from an ``strace -c`` table."""
    counts: dict[str, int] = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 5 and fields[-1] in SYNC_CALLS and fields[3].isdigit():
            counts[fields[-1]] = int(fields[3])
    return counts


def count_syncs(pid: int, load: Callable[[], int]) -> dict[str, Any] | None:
    """Sync calls of process ``pid`` (all threads) during ``load()``; None without strace."""
    if shutil.which("strace") is None:
        return None
    with tempfile.TemporaryDirectory(prefix="folio-bench-strace-") as directory:
        output = Path(directory) / "summary"
        tracer = subprocess.Popen(
            ["strace", "-f", "-c", "-e", f"trace={','.join(SYNC_CALLS)}", "-o", str(output),
             "-p", str(pid)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        assert tracer.stderr is not None
        # strace says "Process N attached" (once per thread) as it attaches, or
        # why it cannot, and exits.
        if "attached" not in tracer.stderr.readline():
            tracer.kill()
            tracer.wait()
            return None
        try:
            events = load()
        finally:
            tracer.send_signal(signal.SIGINT)  # detach and write the summary
            tracer.communicate(timeout=60)
        counts = _parse_summary(output.read_text())
    calls = sum(counts.values())
    return {
        "events": events,
        "sync_calls": calls,
        "by_call": counts,
        "sync_calls_per_1000_events": round(calls * 1000 / events, 2) if events else None,
    }
