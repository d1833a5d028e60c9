"""TLS on the public API: a real ``folio standalone`` with certificates made on the fly.

Plain TLS works end to end with the SDK; a client trusting another CA is
refused with ``TlsError``; mutual TLS refuses a client without a certificate;
the certificate files are reloaded without a restart (rotation to another
CA: new connections use the new certificate).
"""

from __future__ import annotations

import os
import shutil
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

import folio
from tests.support.bookies import BookieProcess, BookieProcesses
from tests.support.certs import Pki
from tests.support.standalone import start_standalone
from tests.support.wait import wait_for


@pytest.fixture
def processes() -> Iterator[BookieProcesses]:
    made = BookieProcesses()
    yield made
    made.kill_all()


def _tls_server(processes: BookieProcesses, tmp_path: Path, pki: Pki, *args: str
                ) -> BookieProcess:
    files = pki.server()
    live = tmp_path / "live"
    live.mkdir()
    shutil.copy(files.cert, live / "server.crt")
    shutil.copy(files.key, live / "server.key")
    return start_standalone(processes, tmp_path / "data", "--tls-cert", str(live / "server.crt"),
                            "--tls-key", str(live / "server.key"), *args)


def _round_trip(client: folio.Client, topic: str) -> list[bytes]:
    client.create_topic(topic, segments=1)
    with client.writer(topic) as writer:
        writer.write_event(b"over tls").result(timeout=30)
    reader = client.reader(topic, "earliest")
    try:
        event = reader.read_next(timeout=30)
        return [event.payload] if event is not None else []
    finally:
        reader.close()


def test_sdk_over_tls_and_a_wrong_ca_is_refused(processes: BookieProcesses,
                                                tmp_path: Path) -> None:
    pki = Pki(tmp_path / "pki")
    server = _tls_server(processes, tmp_path, pki)
    assert "TLS" in server.ready_line
    with folio.Client(server.address, tls=folio.TLS(ca=str(pki.ca)), timeout_s=30) as client:
        assert _round_trip(client, "tls.orders") == [b"over tls"]

    other = Pki(tmp_path / "other", "other")
    with folio.Client(server.address, tls=folio.TLS(ca=str(other.ca)), timeout_s=10) as client, \
            pytest.raises(folio.TlsError, match="does not chain to the CA"):
        client.list_topics()

    # A plain-text client of a TLS port is refused too (no call reaches the broker).
    with folio.Client(server.address, timeout_s=5) as client, \
            pytest.raises(folio.TlsError, match="speaks TLS and the client plain text"):
        client.list_topics()


def test_mutual_tls_needs_a_client_certificate(processes: BookieProcesses,
                                               tmp_path: Path) -> None:
    pki = Pki(tmp_path / "pki")
    server = _tls_server(processes, tmp_path, pki, "--tls-ca", str(pki.ca))
    # With TLS 1.3 the server refuses the missing certificate after the client's
    # side of the handshake is done: the client sees the connection closed.
    with folio.Client(server.address, tls=folio.TLS(ca=str(pki.ca)), timeout_s=10) as client, \
            pytest.raises(folio.FolioUnavailableError):
        client.list_topics()
    stranger = Pki(tmp_path / "stranger", "stranger").client("app")
    tls = folio.TLS(ca=str(pki.ca), cert=str(stranger.cert), key=str(stranger.key))
    with folio.Client(server.address, tls=tls, timeout_s=10) as client, \
            pytest.raises(folio.FolioUnavailableError):
        client.list_topics()
    mine = pki.client("app")
    tls = folio.TLS(ca=str(pki.ca), cert=str(mine.cert), key=str(mine.key))
    with folio.Client(server.address, tls=tls, timeout_s=30) as client:
        client.create_topic("mtls", segments=1)
        assert "mtls" in [topic.name for topic in client.list_topics()]


def test_certificate_rotation_without_restart(processes: BookieProcesses,
                                              tmp_path: Path) -> None:
    old = Pki(tmp_path / "old", "old")
    server = _tls_server(processes, tmp_path, old)
    with folio.Client(server.address, tls=folio.TLS(ca=str(old.ca)), timeout_s=30) as client:
        client.create_topic("rotated", segments=1)

    new = Pki(tmp_path / "new", "new")
    issued = new.server()
    live = tmp_path / "live"
    # Replace both files atomically (rename), as a certificate manager does.
    for source, name in ((issued.key, "server.key"), (issued.cert, "server.crt")):
        shutil.copy(source, live / f".{name}.tmp")
        os.replace(live / f".{name}.tmp", live / name)

    def new_ca_accepted() -> bool:
        with folio.Client(server.address, tls=folio.TLS(ca=str(new.ca)), timeout_s=5) as fresh:
            try:
                return "rotated" in [topic.name for topic in fresh.list_topics()]
            except folio.TlsError:
                return False

    wait_for(new_ca_accepted, "the broker serves the rotated certificate")
    assert server.running()
    with folio.Client(server.address, tls=folio.TLS(ca=str(old.ca)), timeout_s=10) as stale, \
            pytest.raises(folio.TlsError):
        stale.list_topics()


def test_metrics_over_https(processes: BookieProcesses, tmp_path: Path) -> None:
    pki = Pki(tmp_path / "pki")
    server = _tls_server(processes, tmp_path, pki, "--metrics-tls")
    url = server.ready_line.split("metrics on ", 1)[1].rstrip(")")
    assert url.startswith("https://127.0.0.1:")
    context = ssl.create_default_context(cafile=str(pki.ca))
    with urllib.request.urlopen(url, context=context, timeout=30) as response:
        assert b"folio_" in response.read()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url, context=ssl.create_default_context(), timeout=30)
