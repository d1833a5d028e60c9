"""The auto-recovery worker's security towards other bookies: settings, warning, help."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from ledger.autorecovery.config import AutoRecoveryConfig
from ledger.autorecovery.security import in_bookie_connector, in_bookie_warnings
from ledger.cli import autorecovery_command, bookie_command
from ledger.config import BookieListenConfig
from ledger.security.tokens import create_token
from tests.support.certs import Pki


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="folio")
    subparsers = parser.add_subparsers()
    bookie_command(subparsers)
    autorecovery_command(subparsers)
    return parser


def test_a_bookie_checking_tokens_without_a_recovery_token_is_warned(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_bytes(b"s" * 40)
    checking = BookieListenConfig(auth_token_secret_file=str(secret), super_users="broker")
    [warning] = in_bookie_warnings(checking, AutoRecoveryConfig())
    assert "--auto-recovery-token-file is not set" in warning
    assert "--super-users" in warning
    token = tmp_path / "recovery.jwt"
    token.write_text(create_token("recovery", b"s" * 40, "HS256"))
    assert in_bookie_warnings(
        checking, AutoRecoveryConfig(auto_recovery_token_file=str(token))) == []
    assert in_bookie_warnings(BookieListenConfig(), AutoRecoveryConfig()) == []


def test_the_in_bookie_connector_loads_the_bookies_tls_files_and_token(tmp_path: Path) -> None:
    pki = Pki(tmp_path / "pki")
    served = pki.server()
    listen = BookieListenConfig(tls_cert=str(served.cert), tls_key=str(served.key),
                                tls_ca=str(pki.ca))
    token = tmp_path / "recovery.jwt"
    token.write_text(create_token("recovery", b"s" * 40, "HS256"))
    connect = in_bookie_connector(listen, AutoRecoveryConfig(
        auto_recovery_token_file=str(token)))
    assert connect("127.0.0.1:1") is not None
    with pytest.raises(ValueError, match=r"missing\.jwt"):
        in_bookie_connector(listen, AutoRecoveryConfig(
            auto_recovery_token_file=str(tmp_path / "missing.jwt")))


def test_autorecovery_takes_the_brokers_bookie_client_flags(
        capsys: pytest.CaptureFixture[str]) -> None:
    args = _parser().parse_args([
        "autorecovery", "--metadata-url", "zk://127.0.0.1:2181/folio", "--print-config",
        "--bookie-tls-ca", "/etc/folio/ca.crt", "--bookie-tls-cert", "/etc/folio/w.crt",
        "--bookie-tls-key", "/etc/folio/w.key", "--bookie-tls-server-name", "bookies",
        "--bookie-token-file", "/etc/folio/recovery.jwt"])
    assert args.func(args) == 0
    printed = capsys.readouterr().out
    for line in ('bookie_tls_ca = "/etc/folio/ca.crt"', 'bookie_tls_server_name = "bookies"',
                 'bookie_token_file = "/etc/folio/recovery.jwt"'):
        assert line in printed
    assert "auto_recovery_token_file" not in printed  # the bookie's flag, not the worker's
    bad = _parser().parse_args(["autorecovery", "--metadata-url", "zk://127.0.0.1:2181/f",
                                "--bookie-tls-cert", "/etc/folio/w.crt"])
    assert bad.func(bad) == 2
    assert "need bookie_tls_ca" in capsys.readouterr().err


def test_bookie_prints_and_reads_its_recovery_token_file(
        capsys: pytest.CaptureFixture[str]) -> None:
    args = _parser().parse_args(["bookie", "--data-dir", "/tmp/x", "--print-config",
                                 "--auto-recovery-token-file", "/etc/folio/recovery.jwt"])
    assert args.func(args) == 0
    assert 'auto_recovery_token_file = "/etc/folio/recovery.jwt"' in capsys.readouterr().out
