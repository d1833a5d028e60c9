"""TLS settings and reloading: what a rotation changes, and what a bad file does not."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from ledger.security.tls import (
    ClientTls,
    ReloadingChannelCredentials,
    ServerTls,
    TlsConfigError,
    _ServerCertificates,
    metrics_tls_arguments,
)
from tests.support.certs import Pki


def test_settings_go_together() -> None:
    with pytest.raises(TlsConfigError, match="together"):
        ServerTls(cert_file="c")
    with pytest.raises(TlsConfigError, match="needs tls_cert"):
        ServerTls(ca_file="ca")
    with pytest.raises(TlsConfigError, match="together"):
        ClientTls(ca_file="ca", cert_file="c")
    assert not ServerTls().enabled and ServerTls("c", "k", "ca").mutual
    assert metrics_tls_arguments(ServerTls("c", "k", "ca")) == {
        "certfile": "c", "keyfile": "k", "client_cafile": "ca", "client_auth_required": True}


def _replace(source: Path, target: Path) -> None:
    shutil.copy(source, target.with_suffix(".tmp"))
    os.replace(target.with_suffix(".tmp"), target)


def test_server_certificates_reload_on_change_and_keep_the_old_on_a_bad_file(
        tmp_path: Path) -> None:
    pki = Pki(tmp_path / "pki")
    first, second = pki.server("one"), pki.server("two")
    cert, key = tmp_path / "server.crt", tmp_path / "server.key"
    shutil.copy(first.cert, cert)
    shutil.copy(first.key, key)
    loader = _ServerCertificates(ServerTls(str(cert), str(key)))
    assert loader.load() is not None
    assert loader.fetch() is None  # unchanged: gRPC keeps what it has
    _replace(second.cert, cert)  # the key not yet: a mismatched pair is refused
    assert loader.fetch() is None and loader.reloads == 0
    _replace(second.key, key)
    assert loader.fetch() is not None and loader.reloads == 1
    assert loader.fetch() is None
    key.write_text("garbage")
    assert loader.fetch() is None and loader.reloads == 1
    with pytest.raises(TlsConfigError, match="cannot read"):
        _ServerCertificates(ServerTls(str(tmp_path / "missing"), str(key))).load()


def test_client_credentials_move_to_a_new_generation_when_files_change(tmp_path: Path) -> None:
    pki = Pki(tmp_path / "pki")
    ca = tmp_path / "ca.pem"
    shutil.copy(pki.ca, ca)
    now = [0.0]
    credentials = ReloadingChannelCredentials(ClientTls(str(ca)), clock=lambda: now[0])
    assert credentials.current()[1] == 0
    _replace(Pki(tmp_path / "other", "other").ca, ca)
    assert credentials.current()[1] == 0  # checked at most once per interval
    now[0] += 2
    assert credentials.current()[1] == 1
    ca.write_text("not a certificate")
    now[0] += 2
    assert credentials.current()[1] == 1  # a bad file keeps the old credentials
