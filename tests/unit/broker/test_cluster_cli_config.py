"""``folio broker|bookie --metadata-url``: settings layering and usage errors (no ZooKeeper)."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path

import pytest

from folio.cli import main

URL = "zk://127.0.0.1:2181,127.0.0.1:2182/folio"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith(("FOLIO_BROKER_", "FOLIO_BOOKIE_", "FOLIO_CLUSTER_")):
            monkeypatch.delenv(name)


def test_broker_in_a_cluster_needs_no_bookies_and_reads_back(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, printed, err = _run(capsys, "broker", "--metadata-url", URL, "--advertised-address",
                              "broker-1.example:7070", "--ack-quorum", "1", "--print-config")
    assert code == 0, err
    table = tomllib.loads(printed)["broker"]
    assert table["metadata_url"] == URL
    assert table["advertised_address"] == "broker-1.example:7070"
    assert table["metadata_session_timeout_ms"] == 6000
    assert table["ack_quorum"] == 1  # an explicit override of the layout's quorum
    assert "bookies" not in table and "ensemble_size" not in table
    file = tmp_path / "broker.toml"
    file.write_text(printed)
    code, again, err = _run(capsys, "broker", "--config", str(file), "--print-config")
    assert (code, again) == (0, printed), err


def test_broker_in_a_cluster_keeps_its_bookie_security(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """--bookie-tls-* and --bookie-token-file apply to the bookies found in ZooKeeper."""
    code, printed, err = _run(capsys, "broker", "--metadata-url", URL,
                              "--bookie-tls-ca", "/etc/folio/ca.crt",
                              "--bookie-tls-cert", "/etc/folio/broker.crt",
                              "--bookie-tls-key", "/etc/folio/broker.key",
                              "--bookie-tls-server-name", "bookies.folio",
                              "--bookie-token-file", "/etc/folio/broker.jwt", "--print-config")
    assert code == 0, err
    table = tomllib.loads(printed)["broker"]
    assert {name: table[name] for name in table if name.startswith("bookie_")} == {
        "bookie_tls_ca": "/etc/folio/ca.crt", "bookie_tls_cert": "/etc/folio/broker.crt",
        "bookie_tls_key": "/etc/folio/broker.key", "bookie_tls_server_name": "bookies.folio",
        "bookie_token_file": "/etc/folio/broker.jwt"}
    file = tmp_path / "broker.toml"
    file.write_text(printed)
    code, again, err = _run(capsys, "broker", "--config", str(file), "--print-config")
    assert (code, again) == (0, printed), err


def test_broker_in_a_cluster_takes_its_peer_security(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """--peer-tls-ca, --peer-tls-server-name, --peer-token-file: calls to the other brokers."""
    cert, key = tmp_path / "b.crt", tmp_path / "b.key"
    code, printed, err = _run(capsys, "broker", "--metadata-url", URL,
                              "--tls-cert", str(cert), "--tls-key", str(key),
                              "--peer-tls-ca", "/etc/folio/ca.crt",
                              "--peer-tls-server-name", "brokers.folio",
                              "--peer-token-file", "/etc/folio/peer.jwt", "--print-config")
    assert code == 0, err
    table = tomllib.loads(printed)["broker"]
    assert {name: table[name] for name in table if name.startswith("peer_")} == {
        "peer_tls_ca": "/etc/folio/ca.crt", "peer_tls_server_name": "brokers.folio",
        "peer_token_file": "/etc/folio/peer.jwt"}
    file = tmp_path / "broker.toml"
    file.write_text(printed)
    code, again, err = _run(capsys, "broker", "--config", str(file), "--print-config")
    assert (code, again) == (0, printed), err


def test_wildcard_host_with_advertised_address(capsys: pytest.CaptureFixture[str]) -> None:
    code, printed, err = _run(capsys, "broker", "--metadata-url", URL, "--host", "0.0.0.0",
                              "--advertised-address", "broker-1:7070", "--print-config")
    assert code == 0, err
    assert tomllib.loads(printed)["broker"]["host"] == "0.0.0.0"


def test_cluster_broker_serves_kafka(capsys: pytest.CaptureFixture[str]) -> None:
    code, printed, err = _run(capsys, "broker", "--metadata-url", URL, "--kafka-port", "9092",
                              "--print-config")
    assert code == 0, err
    assert tomllib.loads(printed)["broker"]["kafka_port"] == 9092


def test_metadata_url_from_the_environment(capsys: pytest.CaptureFixture[str],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FOLIO_BROKER_METADATA_URL", URL)
    monkeypatch.setenv("FOLIO_BOOKIE_METADATA_URL", "zk://zk:2181/other")
    code, printed, err = _run(capsys, "broker", "--print-config")
    assert code == 0, err
    assert tomllib.loads(printed)["broker"]["metadata_url"] == URL
    code, printed, err = _run(capsys, "bookie", "--data-dir", "/srv/b", "--print-config")
    assert code == 0, err
    assert tomllib.loads(printed)["bookie"]["metadata_url"] == "zk://zk:2181/other"


@pytest.mark.parametrize(("argv", "message"), [
    (["broker", "--metadata-url", "zk://h:2181"], "no chroot"),
    (["broker", "--metadata-url", "http://h/f"], "unknown scheme 'http'"),
    (["autorecovery", "--metadata-url", "etcd://h/f"],
     "unknown scheme 'etcd' (known schemes: zk:// (zk://HOST"),
    (["cluster", "init", "--metadata-url", "etcd://h/f"],
     "(known schemes: zk:// (zk://HOST:PORT[,HOST:PORT...]/CHROOT), rocksdb:// "),
    (["cluster", "describe", "--metadata-url", "file:///m"], "unknown scheme 'file'"),
    (["cluster", "describe", "--metadata-url", "rocksdb://m"], "must be absolute"),
    (["broker", "--metadata-url", URL, "--bookies", "h:1"], "exclude each other"),
    (["broker", "--metadata-url", URL, "--ensemble-size", "1", "--write-quorum", "2",
      "--print-config"], "quorums must satisfy"),
    (["broker", "--advertised-address", "h:1", "--bookies", "h:1"], "needs metadata_url"),
    (["broker", "--metadata-url", URL, "--advertised-address", "nohost"], "not host:port"),
    (["bookie", "--data-dir", "/d", "--metadata-url", "zk://h:99999/f"], "port '99999'"),
    (["broker"], "--bookies (or FOLIO_BROKER_BOOKIES) is required"),
    (["broker", "--metadata-url", URL, "--host", "0.0.0.0"], "give --advertised-address"),
    (["broker", "--metadata-url", URL, "--bookie-tls-cert", "c.pem", "--print-config"],
     "need bookie_tls_ca"),
    (["broker", "--metadata-url", URL, "--peer-tls-ca", "ca.pem", "--print-config"],
     "peer_tls_ca and peer_tls_server_name need tls_cert"),
    (["broker", "--metadata-url", URL, "--kafka-port", "9092", "--host", "0.0.0.0",
      "--advertised-address", "b1:7070", "--print-config"], "needs --kafka-advertised-host"),
    (["bookie", "--data-dir", "/d", "--metadata-url", URL, "--host", "::"],
     "give --advertised-address"),
])
def test_bad_cluster_settings_are_usage_errors(
        argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, *argv)
    assert code == 2
    assert message in err
    assert err.startswith(f"folio {argv[0]}: error: ") or (
        argv[0] == "cluster" and err.startswith(f"folio cluster {argv[1]}: error: "))


def test_cluster_init_and_describe_on_the_embedded_store(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    url = f"rocksdb://{tmp_path / 'metadata'}"
    code, _, err = _run(capsys, "cluster", "describe", "--metadata-url", url)
    assert code == 1
    assert "no metadata store at" in err and f"folio cluster init --metadata-url {url}" in err
    code, out, _ = _run(capsys, "cluster", "init", "--metadata-url", url,
                        "--container-count", "4", "--ensemble-size", "1",
                        "--write-quorum", "1", "--ack-quorum", "1")
    assert code == 0
    assert out == (f"initialised cluster at {url}: 4 segment containers, default ledger "
                   "quorums E=1 Qw=1 Qa=1\n")
    code, out, _ = _run(capsys, "cluster", "describe", "--metadata-url", url, "--json")
    assert code == 0
    described = json.loads(out)
    assert described["metadata_url"] == url
    assert described["layout"] == {"container_count": 4, "ensemble_size": 1,
                                   "write_quorum": 1, "ack_quorum": 1}
    assert described["bookies"] == {"live": {}, "gone": []} and described["brokers"] == {}


def test_cluster_command_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "cluster", "init")
    assert code == 2 and "--metadata-url (or FOLIO_CLUSTER_METADATA_URL) is required" in err
    code, _, err = _run(capsys, "cluster", "init", "--metadata-url", "zk://h/f",
                        "--ensemble-size", "2", "--write-quorum", "3")
    assert code == 2 and "quorums must satisfy" in err
    code, _, err = _run(capsys, "cluster", "describe", "--metadata-url", "zk:/h")
    assert code == 2 and "folio cluster describe: error: metadata URL" in err
