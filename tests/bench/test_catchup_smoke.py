"""``python -m bench.catchup`` end to end with a tiny backlog: every event written is
read back from the start, once with ``read_many`` and once with ``read_next``, each
read in its own process.

It asserts no speed (the machine is shared), only the counts and the lines.
"""

from __future__ import annotations

import re
import subprocess
import sys


def test_catchup_bench_reads_back_every_event() -> None:
    done = subprocess.run([sys.executable, "-m", "bench.catchup", "--sizes", "100,1024",
                           "--events", "3000", "--repeat", "1", "--api", "many,next"],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    for size in (100, 1024):
        assert f"{size} B: wrote 3,000 events in" in done.stdout
        reads = [line for line in lines if re.match(rf"{size} B, read_(many|next): read ", line)]
        assert [read.split(":")[0] for read in reads] == [f"{size} B, read_many",
                                                         f"{size} B, read_next"], done.stdout
        assert all(re.match(rf"{size} B, read_\w+: read 3,000 events in [\d.]+ s: "
                            rf"[\d,]+ events/s", r) for r in reads), reads
        assert all(re.search(r"reader CPU [\d.]+ us/event \(caller's thread [\d.]+\), "
                             r"which waited [\d.]+ s for a CPU", r) for r in reads), reads
        for api in ("read_many", "read_next"):
            assert any(line.startswith(f"{size} B, {api}: median ") for line in lines), done.stdout
