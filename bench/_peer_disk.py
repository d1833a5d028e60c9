"""The disk's synced sequential append, for ``bench.peers``: the ceiling of a journal.

``synced_append`` appends ``append_bytes`` blocks to a fresh file in the
benchmark's directory (the disk every system writes to) and ``fdatasync``s
after each, as the bookie's journal does per group commit, for ``seconds`` (at
least ``minimum`` appends); it reports MB/s and the time per append. The file
is preallocated with ``posix_fallocate`` (the journal writes zeros ahead
instead, ``ledger.bookie.journal``: cheaper syncs of small appends; a 2 GiB
budget of zeros would take longer than the measurement).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

__all__ = ["synced_append"]


def synced_append(directory: Path, *, append_bytes: int = 1 << 20, seconds: float = 2.0,
                  minimum: int = 20) -> dict[str, Any]:
    """MB/s and ms per append of ``append_bytes`` appends, each followed by ``fdatasync``."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "synced-append"
    data = os.urandom(append_bytes)
    appends = 0
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        budget = max(minimum, int(seconds * 1e9 / append_bytes)) * append_bytes
        os.posix_fallocate(fd, 0, budget)
        os.fsync(fd)
        started = time.perf_counter()
        deadline = started + seconds
        while appends < minimum or (time.perf_counter() < deadline
                                    and (appends + 1) * append_bytes <= budget):
            os.pwrite(fd, data, appends * append_bytes)
            os.fdatasync(fd)
            appends += 1
        elapsed = time.perf_counter() - started
    finally:
        os.close(fd)
        path.unlink(missing_ok=True)
    return {"append_bytes": append_bytes, "appends": appends,
            "mb_per_s": round(appends * append_bytes / elapsed / 1e6, 1),
            "ms_per_append": round(elapsed * 1000 / appends, 2)}
