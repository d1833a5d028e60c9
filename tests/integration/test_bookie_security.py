"""The bookie protocol secured: TLS, mutual TLS and token authentication of the brokers.

Real ``folio bookie`` and ``folio broker`` processes on loopback port 0;
certificates made on the fly (``tests/support/certs.py``). A broker with the
right CA, client certificate or token writes through its bookies; a client
without them cannot talk to a bookie.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

import folio
from ledger.api import AddRequest
from ledger.bookie.bookie import Bookie
from ledger.bookie.remote import GrpcBookieClient
from ledger.bookie.service import start_bookie_server
from ledger.config import BookieConfig
from ledger.errors import LedgerError
from ledger.security.tls import ClientTls, ReloadingChannelCredentials, ServerTls
from ledger.security.tokens import create_token
from tests.support.bookies import BookieProcess, BookieProcesses
from tests.support.certs import Pki

_ADD = AddRequest(ledger_id=7, entry_ids=[0], lengths=[1], datas=[b"x"],
                  last_add_confirmed=-1, recovery=False)


def _broker(processes: BookieProcesses, tmp_path: Path, bookie: BookieProcess,
            *args: str) -> BookieProcess:
    return processes.start_folio(
        ["broker", "--data-dir", str(tmp_path / "broker"), "--port", "0", "--metrics-port", "0",
         "--bookies", bookie.address, *args], tmp_path / "broker")


def _write_and_read(broker: BookieProcess) -> None:
    with folio.Client(broker.address, timeout_s=30) as client:
        client.create_topic("secured", segments=1)
        with client.writer("secured") as writer:
            writer.write_event(b"through a secured bookie").result(timeout=30)
        reader = client.reader("secured", "earliest")
        try:
            event = reader.read_next(timeout=30)
            assert event is not None and event.payload == b"through a secured bookie"
        finally:
            reader.close()


async def _add_fails(address: str, **kwargs: object) -> LedgerError:
    client = GrpcBookieClient(address, add_timeout_ms=5000, **kwargs)  # type: ignore[arg-type]
    try:
        with pytest.raises(LedgerError) as caught:
            await client.add_entries(_ADD)
        return caught.value
    finally:
        await client.close()


async def test_mutual_tls_bookie_serves_only_brokers_with_a_certificate(
        bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    pki = Pki(tmp_path / "pki")
    served = pki.server("bookie")
    bookie = bookie_processes.start(
        tmp_path / "bookie", "--tls-cert", str(served.cert), "--tls-key", str(served.key),
        "--tls-ca", str(pki.ca))
    assert "(TLS)" in bookie.ready_line
    broker_cert = pki.client("broker")
    broker = _broker(bookie_processes, tmp_path, bookie, "--bookie-tls-ca", str(pki.ca),
                     "--bookie-tls-cert", str(broker_cert.cert),
                     "--bookie-tls-key", str(broker_cert.key))
    _write_and_read(broker)

    # Plain text, TLS without a client certificate, a certificate of another CA: refused.
    await _add_fails(bookie.address)
    await _add_fails(bookie.address, tls=ReloadingChannelCredentials(ClientTls(str(pki.ca))))
    stranger = Pki(tmp_path / "stranger", "stranger").client("broker")
    await _add_fails(bookie.address, tls=ReloadingChannelCredentials(
        ClientTls(str(pki.ca), str(stranger.cert), str(stranger.key))))


async def test_token_bookie_serves_only_the_broker_role(
        bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("bookie-secret-0123456789abcdef0123456789")
    bookie = bookie_processes.start(tmp_path / "bookie", "--auth-token-secret-file",
                                    str(secret), "--super-users", "broker")
    key = secret.read_bytes().strip()
    token_file = tmp_path / "broker.jwt"
    token_file.write_text(create_token("broker", key, "HS256"))
    broker = _broker(bookie_processes, tmp_path, bookie, "--bookie-token-file", str(token_file))
    _write_and_read(broker)

    missing = await _add_fails(bookie.address)
    assert "no token" in str(missing)
    client_role = create_token("orders-app", key, "HS256")
    wrong_role = await _add_fails(bookie.address, token=lambda: client_role)
    assert "orders-app" in str(wrong_role) and "may not call" in str(wrong_role)
    forged = create_token("broker", b"another-secret-0123456789abcdef0123", "HS256")
    refused = await _add_fails(bookie.address, token=lambda: forged)
    assert "signature" in str(refused)


async def test_the_broker_side_picks_up_new_client_tls_files(tmp_path: Path) -> None:
    """A bookie client opens a new channel when its TLS files change (no restart)."""
    pki = Pki(tmp_path / "pki")
    served = pki.server("bookie")
    bookie = Bookie(BookieConfig(data_dir=str(tmp_path / "bookie")), bookie_id="b")
    server, port = await start_bookie_server(
        bookie, "127.0.0.1", 0, tls=ServerTls(str(served.cert), str(served.key)))
    ca = tmp_path / "client-ca.pem"
    shutil.copy(pki.ca, ca)
    now = [0.0]
    credentials = ReloadingChannelCredentials(ClientTls(str(ca)), clock=lambda: now[0])
    client = GrpcBookieClient(f"127.0.0.1:{port}", add_timeout_ms=5000, tls=credentials)
    try:
        await client.add_entries(_ADD)  # trusted: the first CA signed the bookie
        other = Pki(tmp_path / "other", "other")
        shutil.copy(other.ca, tmp_path / "next.pem")
        os.replace(tmp_path / "next.pem", ca)
        now[0] += 2  # the once-a-second check is due: a new channel with the new CA
        with pytest.raises(LedgerError):
            await client.read_last_add_confirmed(7)
        assert credentials.generation == 1
    finally:
        await client.close()
        await server.stop(None)
        bookie.shutdown()
