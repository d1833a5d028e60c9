"""Auto-recovery in a secured cluster: real ZooKeeper, ``folio bookie`` processes.

Four bookies (E=3, Qw=2, Qa=2) require mutual TLS (``--tls-ca``) and a token
whose role is one of ``--super-users broker,recovery``. Each bookie's
in-process worker reaches the others with its own certificate and
``--auto-recovery-token-file`` (role ``recovery``). One bookie is SIGKILLed for
good: its ledgers must get their write quorum back, proved by killing a second
bookie of the same ensembles and reading every entry. A worker reaching the
bookies as a plain client would be refused and nothing would be recovered.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from ledger.bookie.client_security import BookieSecurity
from ledger.bookie.remote import GrpcBookieClient
from ledger.client.ledger_client import LedgerClient
from ledger.client.registry_directory import RegistryBookieDirectory
from ledger.errors import LedgerError
from ledger.metadata.zookeeper_store import ZooKeeperMetadataStore
from ledger.security.tokens import create_token
from tests.support.bookies import BookieProcesses
from tests.support.certs import Pki
from tests.support.cluster import LocalCluster
from tests.support.wait import wait_for_async

_SECRET = b"bookie-secret-made-for-this-test-0123456789"
_RECOVERY_FLAGS = ("--auto-recovery-grace-ms", "1000", "--auto-recovery-interval-ms", "300")


# Four processes start one after another: more than the default 120 s on a loaded machine.
@pytest.mark.timeout(300)
def test_secured_bookies_re_replicate_a_bookie_killed_for_good(
        zk_url: str, bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    pki = Pki(tmp_path / "pki")
    served, client_cert = pki.server("bookie"), pki.client("broker")
    secret = tmp_path / "bookie.secret"
    secret.write_bytes(_SECRET + b"\n")
    recovery_token, broker_token = tmp_path / "recovery.jwt", tmp_path / "broker.jwt"
    recovery_token.write_text(create_token("recovery", _SECRET, "HS256"))
    broker_token.write_text(create_token("broker", _SECRET, "HS256"))
    cluster = LocalCluster(bookie_processes, zk_url, tmp_path)
    cluster.init(ensemble_size=3, write_quorum=2, ack_quorum=2)
    bookies = {bookie.address: bookie for bookie in (cluster.start_bookie(
        "--tls-cert", str(served.cert), "--tls-key", str(served.key), "--tls-ca", str(pki.ca),
        "--auth-token-secret-file", str(secret), "--super-users", "broker,recovery",
        "--auto-recovery-token-file", str(recovery_token), *_RECOVERY_FLAGS)
        for _ in range(4))}
    assert all("(TLS" in b.ready_line and "auto-recovery on" in b.ready_line
               for b in bookies.values())
    connect = BookieSecurity(str(pki.ca), str(client_cert.cert), str(client_cert.key),
                             bookie_token_file=str(broker_token)).connector()

    async def scenario() -> None:
        store = await ZooKeeperMetadataStore.connect(zk_url)
        directory = RegistryBookieDirectory(store, connect=connect)
        await directory.start()
        client = LedgerClient(store, directory)
        try:
            ledger_ids = []
            for _ in range(3):
                handle = await client.create(ensemble_size=3, write_quorum=2, ack_quorum=2)
                for number in range(20):
                    handle.add_async(b"entry-%d-%d" % (handle.ledger_id, number))
                await handle.close()
                ledger_ids.append(handle.ledger_id)
            # The bookies are secured: a plain client is refused.
            plain = GrpcBookieClient(next(iter(bookies)), read_timeout_ms=5000)
            with pytest.raises(LedgerError):
                await plain.read_entries(ledger_ids[0], 0, 0)
            await plain.close()
            first, _ = await client.read_metadata(ledger_ids[0])
            victim, second = first.ensembles[0][1][:2]
            bookies.pop(victim).kill()

            async def restored() -> bool:
                for ledger_id in ledger_ids:
                    metadata, _ = await client.read_metadata(ledger_id)
                    if any(victim in ids for _, ids in metadata.ensembles):
                        return False
                return True

            await wait_for_async(restored, "the killed bookie replaced in every ledger", 60)
            # Qw copies again: a second bookie of the same ensembles may go too.
            bookies.pop(second).kill()
            directory = RegistryBookieDirectory(store, connect=connect)
            await directory.start()
            reader = LedgerClient(store, directory)
            try:
                for ledger_id in ledger_ids:
                    handle = await reader.open(ledger_id)
                    assert await handle.read(0, 19) == [
                        b"entry-%d-%d" % (ledger_id, n) for n in range(20)]
            finally:
                await reader.close()
        finally:
            await client.close()
            await store.close()

    asyncio.run(scenario())
    assert not any("WARNING" in b.log() and "--auto-recovery-token-file" in b.log()
                   for b in bookies.values())
