"""``folio --config FILE`` and ``--print-config``: the client's [client] table, no server.

The file feeds the client commands, ``--endpoint`` wins over it, a bad file is
a usage error (exit 2), and one file holding [broker] and [client] serves both
``folio broker`` and the client.
"""

from __future__ import annotations

import argparse
import tomllib
from pathlib import Path

import pytest

from folio.cli import build_parser, main
from folio.cli._common import client_config, connect, resolve_endpoint

_FILE = """\
[broker]
port = 7171
metrics_port = 0
bookies = "bookie-0:3181"
ensemble_size = 1
write_quorum = 1
ack_quorum = 1

[client]
endpoint = "file-broker:7171"
timeout_s = 12.5
max_connections_per_endpoint = 3
"""


@pytest.fixture
def config_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    for name in ("FOLIO_ENDPOINT", "FOLIO_CLIENT_ENDPOINT", "FOLIO_CLIENT_CONFIG",
                 "FOLIO_CLIENT_TIMEOUT_S", "FOLIO_CLIENT_MAX_CONNECTIONS_PER_ENDPOINT",
                 "FOLIO_BROKER_CONFIG", "FOLIO_BROKER_PORT"):
        monkeypatch.delenv(name, raising=False)
    path = tmp_path / "folio.toml"
    path.write_text(_FILE)
    return str(path)


def _printed(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    assert main(argv) == 0
    table: dict[str, object] = tomllib.loads(capsys.readouterr().out)["client"]
    return table


#: The security settings when none is given (printed by --print-config too).
_NO_SECURITY = {"tls_ca": "", "tls_cert": "", "tls_key": "", "tls_server_name": "",
                "token": "", "token_file": ""}


def test_print_config_prints_what_the_file_says(
        config_file: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert _printed(["--config", config_file, "--print-config"], capsys) == {
        "endpoint": "file-broker:7171", "timeout_s": 12.5, "max_connections_per_endpoint": 3,
        "connect_timeout_s": 3.0,
        **_NO_SECURITY}


def test_endpoint_flag_and_environment_override_the_file(
        config_file: str, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FOLIO_CLIENT_TIMEOUT_S", "2")
    printed = _printed(["--config", config_file, "--endpoint", "flag:1", "--print-config"],
                       capsys)
    assert printed == {"endpoint": "flag:1", "timeout_s": 2.0, "max_connections_per_endpoint": 3,
                       "connect_timeout_s": 3.0,
                       **_NO_SECURITY}
    monkeypatch.setenv("FOLIO_ENDPOINT", "old-env:2")
    assert _printed(["--config", config_file, "--print-config"], capsys)["endpoint"] == (
        "old-env:2")


def test_printed_config_reads_back(config_file: str, tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--config", config_file, "--print-config"]) == 0
    printed = tmp_path / "client.toml"
    printed.write_text(capsys.readouterr().out)
    assert main(["--config", str(printed), "--print-config"]) == 0
    assert printed.read_text() == capsys.readouterr().out


def test_config_before_or_after_the_command_feeds_client_commands(config_file: str) -> None:
    parser = build_parser()
    for argv in (["--config", config_file, "topic", "list"],
                 ["topic", "list", "--config", config_file],
                 ["--config", "/elsewhere.toml", "consume", "t", "--config", config_file]):
        args = parser.parse_args(argv)
        assert client_config(args, {}).timeout_s == 12.5
        assert resolve_endpoint(args, {}) == "file-broker:7171"
    args = parser.parse_args(["produce", "t", "--config", config_file, "--endpoint", "f:1"])
    assert resolve_endpoint(args, {"FOLIO_CLIENT_ENDPOINT": "env:2"}) == "f:1"
    # A comma-separated list in the file is a bootstrap list, as with --endpoint.
    assert resolve_endpoint(argparse.Namespace(endpoint="only:1,"), {}) == "only:1"


@pytest.mark.parametrize(("text", "message"), [
    ('[client]\ntimeout = 3\n', "[client] has no setting 'timeout'"),
    ('[client]\ntimeout_s = -1\n', "timeout_s must be > 0"),
])
def test_bad_file_is_a_usage_error(tmp_path: Path, text: str, message: str,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    for argv in (["--config", str(path), "--print-config"],
                 ["topic", "list", "--config", str(path)]):
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        assert exit_info.value.code == 2
        assert message in capsys.readouterr().err


def test_one_file_serves_broker_and_client(config_file: str,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["broker", "--config", config_file, "--print-config"]) == 0
    broker = tomllib.loads(capsys.readouterr().out)["broker"]
    assert (broker["port"], broker["metrics_port"], broker["bookies"]) == (
        7171, 0, "bookie-0:3181")
    assert _printed(["--config", config_file, "--print-config"], capsys)["endpoint"] == (
        "file-broker:7171")


def test_client_commands_connect_with_the_file_settings(config_file: str) -> None:
    args = build_parser().parse_args(["consume", "t", "--config", config_file])
    # The client connects lazily: no broker is needed to see its settings.
    with connect(args, "localhost:1") as client:
        assert (client.endpoint, client.timeout_s, client.max_connections_per_endpoint) == (
            "localhost:1", 12.5, 3)
