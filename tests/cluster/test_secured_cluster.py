"""A secured cluster of real processes on a real ZooKeeper: TLS, tokens and grants.

Bookies serve TLS and accept only the brokers' role (``--auth-token-secret-file``
+ ``--super-users broker``); brokers find them through ``--metadata-url`` and
reach them with ``--bookie-tls-ca`` and ``--bookie-token-file``; brokers serve
TLS and check tokens and permissions. Certificates are made per run (trustme,
``tests/support/certs.py``); ZooKeeper itself is not secured (docs/security.md).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import folio
from ledger.api import AddRequest
from ledger.bookie.remote import GrpcBookieClient
from ledger.errors import LedgerError
from ledger.security.tls import ClientTls, ReloadingChannelCredentials
from ledger.security.tokens import create_token
from tests.support.bookies import BookieProcess, BookieProcesses, run_folio
from tests.support.certs import Pki
from tests.support.cluster import LocalCluster
from tests.support.wait import wait_for

_BOOKIE_SECRET = b"bookie-secret-made-for-this-test-0123456789"
_BROKER_SECRET = b"broker-secret-made-for-this-test-0123456789"
_ADD = AddRequest(ledger_id=7, entry_ids=[0], lengths=[1], datas=[b"x"],
                  last_add_confirmed=-1, recovery=False)


def _token(role: str) -> str:
    return create_token(role, _BROKER_SECRET, "HS256")


def _secured_cluster(processes: BookieProcesses, url: str, base: Path,
                     brokers: int) -> tuple[Pki, list[BookieProcess], list[BookieProcess]]:
    pki = Pki(base / "pki")
    served = pki.server("server")
    bookie_secret, broker_secret = base / "bookie.secret", base / "broker.secret"
    bookie_secret.write_bytes(_BOOKIE_SECRET + b"\n")
    broker_secret.write_bytes(_BROKER_SECRET + b"\n")
    broker_token = base / "broker.jwt"
    broker_token.write_text(create_token("broker", _BOOKIE_SECRET, "HS256"))
    tls = ("--tls-cert", str(served.cert), "--tls-key", str(served.key))
    cluster = LocalCluster(processes, url, base)
    cluster.init(ensemble_size=2, write_quorum=2, ack_quorum=2)
    bookies = [cluster.start_bookie(*tls, "--auth-token-secret-file", str(bookie_secret),
                                    "--super-users", "broker") for _ in range(2)]
    assert all("(TLS)" in bookie.ready_line for bookie in bookies)
    started = [cluster.start_broker(
        *tls, "--auth-token-secret-file", str(broker_secret), "--super-users", "admin",
        "--bookie-tls-ca", str(pki.ca), "--bookie-token-file", str(broker_token))
        for _ in range(brokers)]
    return pki, bookies, started


async def _bookie_refuses(address: str, **kwargs: object) -> str:
    client = GrpcBookieClient(address, add_timeout_ms=5000, **kwargs)  # type: ignore[arg-type]
    try:
        with pytest.raises(LedgerError) as caught:
            await client.add_entries(_ADD)
        return str(caught.value)
    finally:
        await client.close()


# Several processes start one after another: more than the default 120 s on a
# loaded machine.
@pytest.mark.timeout(300)
async def test_secured_cluster_serves_tls_token_clients_and_refuses_the_others(
        zk_url: str, bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    pki, bookies, (broker,) = _secured_cluster(bookie_processes, zk_url, tmp_path, 1)
    tls = folio.TLS(ca=str(pki.ca))
    with folio.Client(broker.address, tls=tls, token=_token("admin"), timeout_s=30) as admin:
        admin.create_topic("orders.eu", segments=2)
        admin.grant_permission("shop", "orders.*", ["produce", "consume"])
    # The shop's ledgers go through the bookies found in ZooKeeper, over TLS with the
    # broker's token: a broker that ignored --bookie-* would fail every append.
    with folio.Client(broker.address, tls=tls, token=_token("shop"), timeout_s=30) as shop:
        with shop.writer("orders.eu", folio.StringSerializer()) as writer:
            futures = [writer.write_event(f"e{i}", f"k{i % 4}") for i in range(20)]
            writer.flush(timeout=30)
        assert all(future.result(timeout=0).offset >= 0 for future in futures)
        reader = shop.reader("orders.eu", "earliest", folio.StringSerializer())
        try:
            seen: list[str] = []
            while len(seen) < 20:
                event = reader.read_next(timeout=30)
                assert event is not None, f"only {len(seen)} of 20 events read"
                seen.append(event.payload)
        finally:
            reader.close()
        assert sorted(seen) == sorted(f"e{i}" for i in range(20))
        with pytest.raises(folio.PermissionDeniedError, match="admin permission on topic"):
            shop.create_topic("orders.us")
    with (folio.Client(broker.address, tls=tls, timeout_s=30) as anonymous,
          pytest.raises(folio.UnauthenticatedError, match="no token")):
        anonymous.list_topics()

    # A client cannot talk to a bookie: plain text, TLS without a token, a client's token.
    bookie = bookies[0].address
    trusted = ReloadingChannelCredentials(ClientTls(str(pki.ca)))
    await _bookie_refuses(bookie)
    assert "no token" in await _bookie_refuses(bookie, tls=trusted)
    shop_for_bookie = create_token("shop", _BOOKIE_SECRET, "HS256")
    refused = await _bookie_refuses(bookie, tls=trusted, token=lambda: shop_for_bookie)
    assert "shop" in refused and "may not call" in refused

    # cluster describe talks to ZooKeeper only: it works on a secured cluster as on any.
    described = run_folio("cluster", "describe", "--metadata-url", zk_url, "--json")
    assert described.returncode == 0, described.stderr
    members = json.loads(described.stdout)
    assert set(members["bookies"]["live"]) == {b.address for b in bookies}
    assert list(members["brokers"]) == [broker.address]


@pytest.mark.timeout(300)
def test_grants_made_through_one_broker_apply_on_another(
        zk_url: str, bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    """The grant table is one ZooKeeper node every broker watches (``AclStore``)."""
    pki, _, (first, second) = _secured_cluster(bookie_processes, zk_url, tmp_path, 2)
    tls = folio.TLS(ca=str(pki.ca))

    def auditor_sees_the_topic(broker: BookieProcess = second) -> bool:
        with folio.Client(broker.address, tls=tls, token=_token("auditor"),
                          timeout_s=30) as auditor:
            try:
                return auditor.get_topic("audit.log").name == "audit.log"
            except folio.PermissionDeniedError:
                return False

    with folio.Client(first.address, tls=tls, token=_token("admin"), timeout_s=30) as admin:
        admin.create_topic("audit.log", segments=1)
        assert not auditor_sees_the_topic()
        admin.grant_permission("auditor", "audit.*", ["consume"])
        wait_for(auditor_sees_the_topic, "the second broker applies the grant made on the first",
                 timeout_s=60)
        admin.revoke_permission("auditor", "audit.*", ["consume"])
        wait_for(lambda: not auditor_sees_the_topic(),
                 "the second broker applies the revocation made on the first", timeout_s=60)
    assert not auditor_sees_the_topic(first)
    # And the other way round: a grant through the second broker applies on the first.
    with folio.Client(second.address, tls=tls, token=_token("admin"), timeout_s=30) as admin:
        admin.grant_permission("auditor", "audit.log", ["consume"])
    wait_for(lambda: auditor_sees_the_topic(first),
             "the first broker applies the grant made on the second", timeout_s=60)


def test_a_cluster_broker_with_an_unreadable_bookie_file_fails_before_zookeeper(
        tmp_path: Path) -> None:
    """The files are checked first: a bad one is named, whatever ZooKeeper's state."""
    unreachable = "zk://127.0.0.1:1/never"
    for flag in ("--bookie-tls-ca", "--bookie-token-file"):
        missing = tmp_path / f"missing{flag}"
        done = run_folio("broker", "--metadata-url", unreachable, "--port", "0",
                         "--metrics-port", "0", flag, str(missing))
        assert done.returncode == 1
        assert done.stderr.startswith("folio broker: error: cannot read ")
        assert str(missing) in done.stderr
