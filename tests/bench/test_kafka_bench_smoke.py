"""``python -m bench.kafka``, its ``--security`` run and ``bench.kafka_tls_floor``, tiny.

Checks the report's shape and that every rate was measured (positive);
it asserts no speed (the machine is shared).
"""

from __future__ import annotations

import json
import subprocess
import sys


def test_kafka_bench_reports_both_paths_for_each_size() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.kafka", "--json", "--sizes", "100,1024",
         "--duration-s", "0.3", "--rounds", "1"],
        capture_output=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    rows = json.loads(done.stdout)
    assert [row["size_bytes"] for row in rows] == [100, 1024]
    for row in rows:
        for path in ("sdk", "kafka"):
            for step in ("produce", "consume"):
                assert row[f"{path}_{step}_events_per_s"] > 0
                # CPU time is counted in clock ticks (10 ms): a tiny run may see none.
                assert row[f"{path}_{step}_broker_us_per_event"] >= 0


def test_tls_floor_reports_each_direction() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.kafka_tls_floor", "--json", "--mib", "4"],
        capture_output=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    row = json.loads(done.stdout)
    for direction in ("receive", "send"):
        for path in ("plaintext", "tls"):
            assert row[f"{direction}_{path}_ns_per_byte"] > 0
    assert row["openssl_encrypt_decrypt_mb_per_s"] > 0


def test_security_run_reports_both_listeners() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.kafka", "--security", "--json", "--sizes", "100",
         "--duration-s", "0.3", "--rounds", "1"],
        capture_output=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    (row,) = json.loads(done.stdout)
    for listener in ("plaintext", "sasl_ssl"):
        for step in ("produce", "consume"):
            assert row[f"{listener}_{step}_events_per_s"] > 0
            assert row[f"{listener}_{step}_broker_us_per_event"] >= 0
