"""``folio broker`` against two real ``folio bookie`` processes; every process serves /metrics."""

from __future__ import annotations

from pathlib import Path

import pytest

import folio
from tests.observability.load import read_all, write
from tests.observability.scrape import metrics_url, scrape
from tests.support.bookies import BookieProcesses, run_folio


def test_broker_on_two_bookies_replicates_and_reports(
        tmp_path: Path, bookie_processes: BookieProcesses) -> None:
    bookies = [bookie_processes.start(tmp_path / f"bookie-{n}") for n in range(2)]
    addresses = ",".join(bookie.address for bookie in bookies)
    broker = bookie_processes.start_folio(
        ["broker", "--data-dir", str(tmp_path / "broker"), "--port", "0", "--metrics-port", "0",
         "--bookies", addresses, "--ensemble-size", "2", "--write-quorum", "2",
         "--ack-quorum", "2"], tmp_path / "broker")
    assert broker.ready_line.startswith(f"folio broker listening on 127.0.0.1:{broker.port} ")
    assert f"bookies {addresses}" in broker.ready_line

    with folio.Client(broker.address) as client:
        client.create_topic("remote", segments=2)
        write(client, "remote", 200)
        assert read_all(client, "remote", 200) == 200

    page = scrape(metrics_url(broker))
    assert page.value("folio_appended_events_total", topic="remote") == 200
    assert page.value("folio_ledger_add_seconds_count") >= 2  # each add goes to both bookies
    assert not page.has("folio_bookie_added_entries_total") or page.value(
        "folio_bookie_added_entries_total") == 0  # no bookie in this process
    added = [scrape(metrics_url(bookie)).value("folio_bookie_added_entries_total")
             for bookie in bookies]
    # Ensemble 2, write quorum 2: each bookie holds every entry.
    assert added[0] == added[1] > 0
    assert broker.terminate() == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "--bookies (or FOLIO_BROKER_BOOKIES) is required"),
        (("--bookies", "nohost"), "bookie address 'nohost' is not host:port"),
        (("--bookies", "a:1", "--ensemble-size", "2", "--write-quorum", "2"),
         "ensemble_size 2 needs as many bookies, got 1"),
        (("--bookies", "a:1", "--write-quorum", "2"), "quorums must satisfy"),
    ],
    ids=["no bookies", "bad address", "too few bookies", "bad quorums"],
)
def test_bad_settings_are_usage_errors(args: tuple[str, ...], message: str) -> None:
    shown = run_folio("broker", *args, "--print-config")

    assert shown.returncode == 2
    assert message in shown.stderr
    assert "Traceback" not in shown.stderr


def test_print_config_layers_env_and_flags() -> None:
    shown = run_folio("broker", "--ack-quorum", "1", "--print-config",
                      env={"FOLIO_BROKER_BOOKIES": "h:1,h:2", "FOLIO_BROKER_WRITE_QUORUM": "2",
                           "FOLIO_BROKER_ENSEMBLE_SIZE": "2", "FOLIO_BROKER_PORT": "9999"})

    assert shown.returncode == 0, shown.stderr
    assert 'bookies = "h:1,h:2"' in shown.stdout
    assert "write_quorum = 2" in shown.stdout
    assert "port = 9999" in shown.stdout
    assert "durability" not in shown.stdout
