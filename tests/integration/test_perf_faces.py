"""``folio perf faces`` against a real standalone: every scenario reports, in one JSON object."""

from __future__ import annotations

import json

from tests.support.bookies import BookieProcess, run_folio


def test_perf_faces_reports_both_faces_and_the_fan_in(server: BookieProcess) -> None:
    done = run_folio("perf", "faces", "--topic", "perf-faces", "--duration-s", "0.3",
                     "--fan-in", "50", "--rounds", "2", "--json", "--endpoint", server.address)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["rounds"] == 2
    for scenario in ("blocking_1", "async_1", "blocking_4", "async_4", "fan_in"):
        assert report[scenario]["events"] > 0, scenario
        assert report[scenario]["events_per_s"] > 0, scenario
        assert report[scenario]["cpu_us_per_event"] > 0, scenario
    for writers in (1, 4):
        blocking, asynchronous = report[f"blocking_{writers}"], report[f"async_{writers}"]
        # Each scenario's figures are its median round's, and the ratio is theirs.
        assert len(blocking["rounds_events_per_s"]) == 2
        assert asynchronous["events_per_s"] == min(asynchronous["rounds_events_per_s"])
        assert report["async_vs_blocking"][str(writers)] == round(
            asynchronous["events_per_s"] / blocking["events_per_s"], 2)
    assert report["fan_in"]["coroutines"] == 50
    latency = report["fan_in"]["latency_ms"]
    assert 0 < latency["p50"] <= latency["p99"] <= latency["max"]


def test_perf_faces_says_when_there_is_no_broker() -> None:
    done = run_folio("perf", "faces", "--topic", "t", "--endpoint", "127.0.0.1:1")
    assert done.returncode == 1
    assert done.stderr.startswith("folio perf faces: error: ")
