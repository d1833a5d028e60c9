"""Auto-recovery in a secured cluster: real ZooKeeper, ``folio bookie`` processes.

Four bookies (E=3, Qw=2, Qa=2) require mutual TLS (``--tls-ca``) and a token
whose role is one of ``--super-users broker,recovery``. The workers reach them
either from inside each bookie (its own certificate and
``--auto-recovery-token-file``) or as a ``folio autorecovery`` process (the
broker's ``--bookie-tls-*`` and ``--bookie-token-file``). One bookie is
SIGKILLed for good: its ledgers must get their write quorum back, proved by
killing a second bookie of the same ensembles and reading every entry. A worker
reaching the bookies as a plain client would be refused and recover nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from ledger.bookie.client_security import BookieSecurity
from ledger.bookie.remote import GrpcBookieClient
from ledger.client.ledger_client import LedgerClient
from ledger.client.registry_directory import RegistryBookieDirectory
from ledger.errors import LedgerError
from ledger.metadata.zookeeper_store import ZooKeeperMetadataStore
from ledger.security.tokens import create_token
from tests.support.bookies import BookieProcess, BookieProcesses
from tests.support.certs import CertFiles, Pki
from tests.support.cluster import LocalCluster
from tests.support.wait import wait_for_async

_SECRET = b"bookie-secret-made-for-this-test-0123456789"
_RECOVERY_FLAGS = ("--auto-recovery-grace-ms", "1000", "--auto-recovery-interval-ms", "300")


class _Secured:
    """A CA, the bookies' certificate, a client certificate and tokens, under ``base``."""

    def __init__(self, base: Path) -> None:
        self.pki = Pki(base / "pki")
        self.served: CertFiles = self.pki.server("bookie")
        self.client: CertFiles = self.pki.client("broker")
        self.secret = base / "bookie.secret"
        self.secret.write_bytes(_SECRET + b"\n")
        self.recovery_token, self.broker_token = base / "recovery.jwt", base / "broker.jwt"
        self.recovery_token.write_text(create_token("recovery", _SECRET, "HS256"))
        self.broker_token.write_text(create_token("broker", _SECRET, "HS256"))

    def bookie_flags(self) -> tuple[str, ...]:
        return ("--tls-cert", str(self.served.cert), "--tls-key", str(self.served.key),
                "--tls-ca", str(self.pki.ca), "--auth-token-secret-file", str(self.secret),
                "--super-users", "broker,recovery")

    def client_flags(self, token: Path) -> tuple[str, ...]:
        return ("--bookie-tls-ca", str(self.pki.ca), "--bookie-tls-cert", str(self.client.cert),
                "--bookie-tls-key", str(self.client.key), "--bookie-token-file", str(token))

    def connector(self) -> Callable[[str], GrpcBookieClient]:
        return BookieSecurity(str(self.pki.ca), str(self.client.cert), str(self.client.key),
                              bookie_token_file=str(self.broker_token)).connector()


async def _kill_one_for_good_and_check(zk_url: str, bookies: dict[str, BookieProcess],
                                       connect: Callable[[str], GrpcBookieClient]) -> None:
    """Write 3 ledgers, kill a bookie, wait for recovery, kill a second, read all back."""
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


# Four processes start one after another: more than the default 120 s on a loaded machine.
@pytest.mark.timeout(300)
def test_secured_bookies_re_replicate_a_bookie_killed_for_good(
        zk_url: str, bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    secured = _Secured(tmp_path)
    cluster = LocalCluster(bookie_processes, zk_url, tmp_path)
    cluster.init(ensemble_size=3, write_quorum=2, ack_quorum=2)
    bookies = {bookie.address: bookie for bookie in (cluster.start_bookie(
        *secured.bookie_flags(), "--auto-recovery-token-file", str(secured.recovery_token),
        *_RECOVERY_FLAGS) for _ in range(4))}
    assert all("(TLS" in b.ready_line and "auto-recovery on" in b.ready_line
               for b in bookies.values())
    asyncio.run(_kill_one_for_good_and_check(zk_url, bookies, secured.connector()))
    assert not any("--auto-recovery-token-file is not set" in b.log() for b in bookies.values())


@pytest.mark.timeout(300)
def test_folio_autorecovery_reaches_secured_bookies_with_the_brokers_flags(
        zk_url: str, bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    secured = _Secured(tmp_path)
    cluster = LocalCluster(bookie_processes, zk_url, tmp_path)
    cluster.init(ensemble_size=3, write_quorum=2, ack_quorum=2)
    # No worker inside the bookies: only the process below recovers.
    bookies = {bookie.address: bookie for bookie in (cluster.start_bookie(
        *secured.bookie_flags(), "--no-auto-recovery") for _ in range(4))}
    worker = bookie_processes.start_folio(
        ["autorecovery", "--metadata-url", zk_url, "--metrics-port", "0",
         "--metadata-session-timeout-ms", "2000", *_RECOVERY_FLAGS,
         *secured.client_flags(secured.recovery_token)], tmp_path / "autorecovery")
    assert "TLS to bookies, token to bookies" in worker.ready_line
    asyncio.run(_kill_one_for_good_and_check(zk_url, bookies, secured.connector()))
    assert worker.terminate() == 0
