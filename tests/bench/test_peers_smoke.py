"""``python -m bench.peers`` end to end, tiny and bounded: real servers, real clients.

Runs the whole harness (Folio standalone, nats-server, redis-server,
redis-py, redis-benchmark, the rocksdict ceiling, the strace probe) with
half-second loads and checks the report's shape and its bookkeeping: every
cell is there, nothing failed, a catch-up reader read back exactly what was
acknowledged. It asserts no speed (the machine is shared).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

SIZES = ("100",)  # one size keeps the run short; every size takes the same path
WRITERS = ("1", "2")
PEERS = ("nats", "redis")
FIXED_RATE = "2000"


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("peers")
    done = subprocess.run(
        [sys.executable, "-m", "bench.peers", "--json", "--quiet", "--duration-s", "0.5",
         "--e2e-duration-s", "1", "--e2e-rates", FIXED_RATE, "--sizes", ",".join(SIZES),
         "--writers", ",".join(WRITERS),
         "--dir", str(base), "--results-dir", str(base / "results")],
        capture_output=True, text=True, timeout=540, check=False)
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


@pytest.mark.timeout(600)
def test_headline_ratios_are_positive_numbers(report: dict[str, Any]) -> None:
    for name in ("produce_vs_best_peer", "consume_vs_best_peer", "produce_vs_ceiling"):
        assert isinstance(report[name], float) and report[name] > 0, name
    assert set(report["targets"]) == {"produce_vs_best_peer", "produce_vs_ceiling",
                                      "consume_vs_best_peer", "e2e_p99_ms",
                                      "produce_1kib_vs_disk", "e2e_10k_p50_vs_redis",
                                      "e2e_10k_p99_vs_redis"}
    assert report["ratios"]["100"]["produce"]["best_peer"] in (*PEERS, "redis_benchmark")
    # The disk's synced sequential append, measured in the same run (issue 25).
    disk = report["disk"]
    assert disk["append_bytes"] == 1 << 20 and disk["appends"] >= 20
    assert disk["mb_per_s"] > 0 and disk["ms_per_append"] > 0


@pytest.mark.timeout(600)
def test_every_system_has_every_produce_cell_without_errors(report: dict[str, Any]) -> None:
    systems = report["systems"]
    assert set(systems) == {"folio", *PEERS, "redis_benchmark", "ceiling"}
    for name in ("folio", *PEERS, "redis_benchmark"):
        assert systems[name]["durability"]
        for size in SIZES:
            assert set(systems[name]["produce"][size]) == set(WRITERS), name
            for writers, cell in systems[name]["produce"][size].items():
                assert cell["events"] > 0 and cell["events_per_s"] > 0, (name, size, writers)
                assert cell["errors"] == 0, (name, size, writers, cell)
                assert cell["writers"] == int(writers)
                assert cell["latency_ms"]["p50"] <= cell["latency_ms"]["p99"]
    for size in SIZES:
        assert {cell["batch"] for cell in systems["ceiling"]["produce"][size].values()} == {
            100, 1000}


@pytest.mark.timeout(600)
def test_catch_up_readers_read_back_what_was_acknowledged(report: dict[str, Any]) -> None:
    for name in ("folio", *PEERS):
        for size in SIZES:
            consumed = report["systems"][name]["consume"][size]
            assert consumed["events"] == report["systems"][name]["produce"][size]["1"]["events"]
            assert consumed["events_per_s"] > 0


@pytest.mark.timeout(600)
def test_end_to_end_runs_at_a_fixed_rate_and_measures_latency(report: dict[str, Any]) -> None:
    folio_rate = report["systems"]["folio"]["e2e"]["rate"]
    for name in ("folio", *PEERS):
        e2e = report["systems"][name]["e2e"]
        assert 0 < e2e["rate"] <= folio_rate
        assert e2e["events"] > 0 and 0 < e2e["events_read"] <= e2e["events"]
        assert e2e["end_to_end_latency_ms"]["p99"] is not None
        assert e2e["publish_latency_ms"]["p99"] is not None
    assert report["e2e_p99_ms"] == report["systems"]["folio"]["e2e"][
        "end_to_end_latency_ms"]["p99"]


@pytest.mark.timeout(600)
def test_every_system_runs_the_same_fixed_rates(report: dict[str, Any]) -> None:
    for name in ("folio", *PEERS):
        (cell,) = report["systems"][name]["e2e_fixed"].values()
        assert cell["rate"] == int(FIXED_RATE), name
        assert cell["events"] > 0 and 0 < cell["events_read"] <= cell["events"], name
        assert cell["end_to_end_latency_ms"]["p99"] is not None, name


@pytest.mark.timeout(600)
def test_folio_reports_its_latency_budget_per_stage(report: dict[str, Any]) -> None:
    folio = report["systems"]["folio"]
    for cell in (folio["e2e"], folio["e2e_fixed"][FIXED_RATE]):
        stages = cell["budget"]["stages"]
        assert list(stages) == ["sdk_batch_wait", "sdk_send_to_ack", "broker_append",
                                "ledger_add", "journal_wait", "fsync", "ack", "reader_wake",
                                "end_to_end"]
        # Every block the writer sent passed these (the reader's wake-ups may be fewer).
        for stage in ("sdk_batch_wait", "sdk_send_to_ack", "broker_append", "ledger_add",
                      "journal_wait", "fsync", "ack"):
            assert stages[stage]["count"] > 0, stage
            assert stages[stage]["p50_ms"] <= stages[stage]["p99_ms"], stage


@pytest.mark.timeout(600)
def test_results_files_hold_the_report_table_and_machine(report: dict[str, Any]) -> None:
    json_path, markdown_path = (Path(path) for path in report["results_files"])
    written = json.loads(json_path.read_text())
    assert written["produce_vs_best_peer"] == report["produce_vs_best_peer"]
    markdown = markdown_path.read_text()
    assert "| system | event | writers | produce events/s" in markdown
    assert "| disk: synced sequential append | MB/s |" in markdown
    assert "## Machine" in markdown and "cores" in markdown
    assert report["machine"]["cores"] >= 1
    assert report["machine"]["clients"]["nats-py"] and report["machine"]["clients"]["redis"]
