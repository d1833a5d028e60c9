"""``folio cluster init|describe`` and registrations, with real ZooKeeper and real processes.

Bookies register (ephemeral ``/bookies/available/<id>``, persistent
``/bookies/all/<id>``); a SIGKILLed bookie's node vanishes once its session
times out, a SIGTERMed one's at once; processes refuse an un-initialised
chroot; the registry-backed directory follows the live bookies.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from ledger.client.ledger_client import LedgerClient
from ledger.client.registry_directory import RegistryBookieDirectory
from ledger.config import LedgerConfig
from ledger.errors import BookieUnavailableError, NotEnoughBookiesError
from ledger.metadata.cluster_layout import bookie_all_path, bookie_available_path
from ledger.metadata.zookeeper_store import ZooKeeperMetadataStore
from tests.support.bookies import BookieProcesses, run_folio
from tests.support.cluster import LocalCluster
from tests.support.wait import wait_for, wait_for_async
from tests.support.zookeeper import ZooKeeperServer, zk_client


def _describe(url: str) -> dict[str, object]:
    done = run_folio("cluster", "describe", "--metadata-url", url, "--json")
    assert done.returncode == 0, done.stderr
    described: dict[str, object] = json.loads(done.stdout)
    return described


def test_init_is_idempotent_and_names_conflicts(zk_url: str) -> None:
    url = zk_url + "/nested/cluster"  # the chroot is created, parents included
    done = run_folio("cluster", "init", "--metadata-url", url, "--container-count", "8")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"initialised cluster at {url}: 8 segment containers, "
                                  "default ledger quorums E=3 Qw=2 Qa=2")
    again = run_folio("cluster", "init", "--metadata-url", url, "--container-count", "8")
    assert again.returncode == 0, again.stderr
    assert "exists already with this layout" in again.stdout
    conflict = run_folio("cluster", "init", "--metadata-url", url, "--container-count", "16",
                         "--ack-quorum", "1")
    assert conflict.returncode == 1
    assert "a cluster with another layout exists" in conflict.stderr
    assert "asked container_count: 16 != 8; asked ack_quorum: 1 != 2" in conflict.stderr
    assert _describe(url) == {
        "metadata_url": url,
        "layout": {"container_count": 8, "ensemble_size": 3, "write_quorum": 2,
                   "ack_quorum": 2},
        "bookies": {"live": {}, "gone": []},
        "brokers": {},
        "under_replicated_ledgers": [],
        # No broker yet: every container is unowned.
        "containers": [{"container": n, "owner": None, "address": None} for n in range(8)],
    }
    text = run_folio("cluster", "describe", "--metadata-url", url)
    assert text.returncode == 0, text.stderr
    assert text.stdout.splitlines() == [
        f"cluster at {url}: 8 segment containers, default ledger quorums E=3 Qw=2 Qa=2",
        "live bookies (0): none",
        "live brokers (0): none",
        "containers (8):",
        "  no owner now: 8 [0,1,2,3,4,5,6,7]",
    ]


def test_processes_refuse_an_uninitialised_cluster(zookeeper: ZooKeeperServer,
                                                   zk_url: str, tmp_path: Path) -> None:
    missing = zookeeper.url("/never-initialised")
    for argv in (["bookie", "--data-dir", str(tmp_path / "b"), "--port", "0",
                  "--metrics-port", "0", "--metadata-url", missing],
                 ["broker", "--port", "0", "--metrics-port", "0", "--metadata-url", missing],
                 ["cluster", "describe", "--metadata-url", missing]):
        done = run_folio(*argv)
        assert done.returncode == 1, (argv, done.stderr)
        assert f"run `folio cluster init --metadata-url {missing}` first" in done.stderr
    # A chroot that exists without the /cluster record (zk_url is an empty chroot).
    done = run_folio("broker", "--port", "0", "--metrics-port", "0", "--metadata-url", zk_url)
    assert done.returncode == 1
    assert "/cluster is missing): run `folio cluster init" in done.stderr
    unreachable = run_folio("cluster", "describe", "--metadata-url", "zk://127.0.0.1:1/x",
                            "--connect-timeout-ms", "1000")
    assert unreachable.returncode == 1
    assert "no ZooKeeper server of 127.0.0.1:1 answered within 1000 ms" in unreachable.stderr


# Several processes start one after another: more than the default 120 s on a
# loaded machine.
@pytest.mark.timeout(300)
def test_bookies_register_and_vanish(zookeeper: ZooKeeperServer, zk_url: str,
                                     bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    cluster = LocalCluster(bookie_processes, zk_url, tmp_path)
    cluster.init()
    bookies = [cluster.start_bookie() for _ in range(3)]
    assert "registered as" in bookies[0].ready_line
    described = _describe(zk_url)
    assert described["bookies"] == {
        "live": {b.address: b.address for b in bookies}, "gone": []}
    client = zk_client(zookeeper.address + zk_url.removeprefix(f"zk://{zookeeper.address}"))
    try:
        killed, stopped, _kept = bookies
        killed.kill()
        # The dead bookie's node goes when its session times out; its record stays.
        wait_for(lambda: client.exists(bookie_available_path(killed.address)) is None,
                 "the SIGKILLed bookie's registration vanished", timeout_s=60)
        assert client.exists(bookie_all_path(killed.address)) is not None
        assert stopped.terminate() == 0
        # A clean stop unregisters at once (no need to wait for the session).
        assert client.exists(bookie_available_path(stopped.address)) is None
        described = _describe(zk_url)
        assert described["bookies"] == {
            "live": {bookies[2].address: bookies[2].address},
            "gone": sorted([killed.address, stopped.address])}
        # The same bookie (same data, same address) comes back and registers again.
        again = cluster.start_bookie("--port", str(stopped.port), data_dir=stopped.data_dir)
        assert again.address == stopped.address
        assert client.exists(bookie_available_path(stopped.address)) is not None
    finally:
        client.stop()
        client.close()


def test_a_second_bookie_with_the_same_address_is_refused(
        zk_url: str, bookie_processes: BookieProcesses, tmp_path: Path) -> None:
    cluster = LocalCluster(bookie_processes, zk_url, tmp_path)
    cluster.init()
    first = cluster.start_bookie()
    twin = run_folio("bookie", "--data-dir", str(tmp_path / "twin"), "--port", "0",
                     "--metrics-port", "0", "--metadata-url", zk_url,
                     "--metadata-session-timeout-ms", "1000",
                     "--advertised-address", first.address, timeout_s=60)
    assert twin.returncode == 1
    assert f"/bookies/available/{first.address} is held by another session" in twin.stderr
    assert first.running()


async def test_registry_directory_follows_live_bookies(zk_url: str) -> None:
    async with await ZooKeeperMetadataStore.connect(zk_url, create_chroot=True) as store:
        await store.create("/bookies/available", make_parents=True)
        # Registrations only: no bookie listens there, placement needs none.
        owners = [await ZooKeeperMetadataStore.connect(zk_url) for _ in range(3)]
        for index, owner in enumerate(owners[:2]):
            await owner.create(bookie_available_path(f"127.0.0.1:{index + 1}"), b"",
                               ephemeral=True)

        def unreachable(bookie_id: str) -> LedgerClient:
            raise BookieUnavailableError(f"test: no bookie at {bookie_id}")

        directory = RegistryBookieDirectory(store, connect=unreachable)  # type: ignore[arg-type]
        await directory.start()
        ledgers = LedgerClient(store, directory, LedgerConfig(
            ensemble_size=3, write_quorum=2, ack_quorum=2))
        try:
            assert sorted(directory.available()) == ["127.0.0.1:1", "127.0.0.1:2"]
            with pytest.raises(NotEnoughBookiesError, match="needs 3 bookies, 2 available"):
                await ledgers.create()

            async def count_is(expected: int) -> bool:
                return len(directory.available()) == expected

            await owners[2].create(bookie_available_path("127.0.0.1:3"), b"", ephemeral=True)
            await wait_for_async(lambda: count_is(3), "the third bookie seen")
            assert sorted(directory.choose(3)) == ["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"]
            await owners[0].close()  # its session ends: its node vanishes
            await wait_for_async(lambda: count_is(2), "the first bookie's departure seen")
            assert "127.0.0.1:1" not in directory.choose(3)
        finally:
            await ledgers.close()
            await asyncio.gather(*(owner.close() for owner in owners[1:]))
