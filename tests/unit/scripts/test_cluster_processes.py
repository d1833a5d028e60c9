"""scripts/cluster_processes.py: the local cluster's record of how each process starts, and pids.

The helpers ``scripts/cluster.py status|stop|restart`` and ``up`` rely on,
on files in a tmp dir (the real processes: tests/cluster/test_make_cluster.py).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))

from cluster_processes import (
    LAYOUT_FILE,
    Layout,
    forget,
    read_pids,
    ready_address,
    start_time,
)


def test_layout_round_trips_in_start_order(tmp_path: Path) -> None:
    layout = Layout("zk://127.0.0.1:2181/folio", 2181,
                    {"bookie-1": ["bookie", "--port", "3181"],
                     "broker-1": ["broker", "--port", "7071"]})
    layout.save(tmp_path)
    loaded = Layout.load(tmp_path)
    assert loaded == layout
    assert loaded is not None and loaded.names == ["zookeeper", "bookie-1", "broker-1"]


def test_a_missing_or_broken_layout_is_none(tmp_path: Path) -> None:
    assert Layout.load(tmp_path) is None
    (tmp_path / LAYOUT_FILE).write_text('{"zk_port": "x"}')
    assert Layout.load(tmp_path) is None


def test_forget_drops_one_name_and_read_pids_skips_the_dead(tmp_path: Path) -> None:
    me = os.getpid()
    (tmp_path / "pids").write_text(f"zookeeper {me} {start_time(me)}\n"
                                   f"broker-1 {me} {start_time(me)}\n"
                                   f"broker-2 {me} 1\n")  # a reused pid: another start time
    assert read_pids(tmp_path) == [("zookeeper", me), ("broker-1", me)]
    forget(tmp_path, "broker-1")
    assert [name for name, _ in read_pids(tmp_path)] == ["zookeeper"]
    assert "broker-2" in (tmp_path / "pids").read_text()


def test_ready_address_reads_the_ready_line(tmp_path: Path) -> None:
    (tmp_path / "broker-1.out").write_text(
        "folio broker listening on 127.0.0.1:7071 (metrics on ...)\nmore\n")
    assert ready_address(tmp_path, "broker-1") == "127.0.0.1:7071"
    assert ready_address(tmp_path, "broker-2") == ""
