"""Auto-recovery with real ZooKeeper, ``folio bookie`` processes, a broker and the SDK.

Four bookies (E=3, Qw=2, Qa=2) hold a topic whose segments roll over to a new
ledger every few blocks, so most of its ledgers are closed. One bookie is SIGKILLed
for good: once its registration is gone for the grace period, the bookies'
auto-recovery workers copy its entries to the bookie left over and swap it into
the ledgers' metadata, while the broker's writers replace it in their open
ledgers by themselves (once it leaves the registry, or on their next adds).
Then every entry is on Qw live bookies again, so a second bookie may go and
every event is still readable.
"""

from __future__ import annotations

import asyncio
import json
import re
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

import folio
from ledger.api import LedgerState
from ledger.autorecovery.marks import AUDITOR_PATH, UNDER_REPLICATED_PATH
from ledger.bookie.remote import GrpcBookieClient
from ledger.client.ledger_client import LedgerClient
from ledger.client.registry_directory import RegistryBookieDirectory
from ledger.client.write_sets import ensemble_span, write_set
from ledger.metadata.ledger_metadata import LedgerMetadata
from ledger.metadata.zookeeper_store import ZooKeeperMetadataStore
from tests.support.bookies import BookieProcesses, run_folio
from tests.support.cluster import LocalCluster
from tests.support.wait import wait_for, wait_for_async
from tests.support.zookeeper import ZooKeeperServer, zk_client

RECOVERY_FLAGS = ("--auto-recovery-grace-ms", "1000", "--auto-recovery-interval-ms", "300")


def _ledgers(zk: KazooClient) -> dict[int, LedgerMetadata]:
    found = {}
    for name in zk.get_children("/ledgers"):
        if name.startswith("L"):
            data, _ = zk.get(f"/ledgers/{name}")
            metadata = LedgerMetadata.from_bytes(data)
            found[metadata.ledger_id] = metadata
    return found


async def _copies(ledgers: dict[int, LedgerMetadata], live: set[str]) -> dict[str, int]:
    """Check that every confirmed entry is on each live bookie of its write set.

    Returns counts: ledgers and entries checked. Asks each bookie directly.
    """
    clients = {address: GrpcBookieClient(address) for address in live}
    entries = 0
    try:
        for ledger_id, metadata in ledgers.items():
            end = metadata.last_entry_id
            if metadata.state is not LedgerState.CLOSED:
                tails = await asyncio.gather(
                    *(clients[b].read_last_add_confirmed(ledger_id)
                      for b in metadata.ensembles[-1][1] if b in clients),
                    return_exceptions=True)
                end = max([-1, *(t.last_add_confirmed for t in tails
                                 if not isinstance(t, BaseException))])
            for entry_id in range(end + 1):
                _, bookie_ids = ensemble_span(metadata.ensembles, entry_id)
                holders = [bookie_ids[p] for p in write_set(entry_id, 3, 2)]
                assert set(holders) <= live, (ledger_id, entry_id, holders)
                for holder in holders:
                    reply = await clients[holder].read_entries(ledger_id, entry_id, entry_id)
                    assert reply.entry_ids[:1] == [entry_id], (ledger_id, entry_id, holder)
                entries += 1
    finally:
        for client in clients.values():
            await client.close()
    return {"ledgers": len(ledgers), "entries": entries}


def _metric(ready_line: str, name: str) -> float:
    """A sample of a process's /metrics (its URL is in its ready line)."""
    url = re.search(r"metrics on (http://\S+/metrics)", ready_line)
    assert url is not None, ready_line
    with urllib.request.urlopen(url.group(1), timeout=10) as response:
        text = response.read().decode()
    found = re.search(rf"^{name} (\S+)$", text, re.MULTILINE)
    assert found is not None, f"{name} not in {url.group(1)}"
    return float(found.group(1))


def _marks(zk: KazooClient) -> list[str]:
    if zk.exists(UNDER_REPLICATED_PATH) is None:
        return []
    return sorted(zk.get_children(UNDER_REPLICATED_PATH))


def _write(client: folio.Client, first: int, count: int) -> None:
    with client.writer("data", folio.StringSerializer()) as writer:
        futures = [writer.write_event(f"event-{n:05d}-" + "x" * 40, f"key-{n % 8}")
                   for n in range(first, first + count)]
        writer.flush(timeout=60)
    assert all(future.result(timeout=0).offset >= 0 for future in futures)


def _read_all(client: folio.Client, count: int) -> list[folio.Event[Any]]:
    events: list[folio.Event[Any]] = []
    with client.reader("data", serializer=folio.StringSerializer()) as reader:
        def more() -> bool:
            event = reader.read_next(timeout=0.5)
            if event is not None:
                events.append(event)
            return len(events) >= count

        wait_for(more, f"{count} events (got {len(events)})", timeout_s=60)
        assert reader.read_next(timeout=0.5) is None, "more events than were written"
    return events


# Five processes start one after another: more than the default 120 s on a loaded machine.
@pytest.mark.timeout(300)
def test_a_bookie_killed_for_good_is_re_replicated_then_a_second_may_go(
        zookeeper: ZooKeeperServer, zk_url: str, bookie_processes: BookieProcesses,
        tmp_path: Path) -> None:
    cluster = LocalCluster(bookie_processes, zk_url, tmp_path)
    cluster.init(ensemble_size=3, write_quorum=2, ack_quorum=2)
    bookies = {bookie.address: bookie
               for bookie in (cluster.start_bookie(*RECOVERY_FLAGS) for _ in range(4))}
    assert all("auto-recovery on" in bookie.ready_line for bookie in bookies.values())
    broker = cluster.start_broker("--data-dir", str(tmp_path / "unused"))
    zk = zk_client(zookeeper.address + zk_url.removeprefix(f"zk://{zookeeper.address}"))
    try:
        with folio.Client(broker.address, timeout_s=30) as client:
            # A block (entry) per segment per flush, a new ledger every few blocks.
            client.create_topic("data", 2, ledger_rollover_bytes=4096)
            for batch in range(20):
                _write(client, batch * 20, 20)
            before = _ledgers(zk)
            victim = bookies.pop(before[max(before)].ensembles[0][1][0])
            held = [ledger_id for ledger_id, metadata in before.items()
                    if victim.address in metadata.ensembles[0][1]]
            assert len(held) >= 3  # several ledgers, closed and open, lose a copy
            assert any(before[ledger_id].state is LedgerState.CLOSED for ledger_id in held)
            victim.kill()
            _write(client, 400, 100)  # while the bookie is gone

            def restored() -> bool:
                return not _marks(zk) and all(
                    victim.address not in bookie_ids
                    for metadata in _ledgers(zk).values()
                    for _, bookie_ids in metadata.ensembles)

            wait_for(restored, "no ledger names the killed bookie and no mark is left",
                     timeout_s=60)
            described = json.loads(cluster.run("cluster", "describe", "--metadata-url",
                                               zk_url, "--json").stdout)
            assert described["under_replicated_ledgers"] == []
            assert described["bookies"]["gone"] == [victim.address]
            # Every confirmed entry of every ledger is on Qw=2 live bookies again.
            checked = asyncio.run(_copies(_ledgers(zk), set(bookies)))
            assert checked["entries"] >= 40, checked
            # The workers' metrics: entries copied, nothing under-replicated any more.
            assert sum(_metric(b.ready_line, "folio_ledger_rereplicated_entries_total")
                       for b in bookies.values()) > 0
            wait_for(lambda: all(
                _metric(b.ready_line, "folio_ledger_under_replicated_ledgers") == 0
                for b in bookies.values()), "the under-replicated gauges at 0")
            # A second bookie, which shared write sets with the first, goes too.
            second = next(address for address in before[held[0]].ensembles[0][1]
                          if address != victim.address)
            bookies.pop(second).kill()
            events = _read_all(client, 500)
            assert sorted(int(e.payload.split("-")[1]) for e in events) == list(range(500))
    finally:
        zk.stop()
        zk.close()


def test_describe_lists_under_replicated_ledgers(
        zookeeper: ZooKeeperServer, zk_url: str, bookie_processes: BookieProcesses,
        tmp_path: Path) -> None:
    cluster = LocalCluster(bookie_processes, zk_url, tmp_path)
    cluster.init()
    zk = zk_client(zookeeper.address + zk_url.removeprefix(f"zk://{zookeeper.address}"))
    try:
        for ledger_id in (3, 12):
            zk.create(f"{UNDER_REPLICATED_PATH}/L{ledger_id:020d}", b"{}", makepath=True)
    finally:
        zk.stop()
        zk.close()
    described = cluster.run("cluster", "describe", "--metadata-url", zk_url, "--json")
    assert described.returncode == 0, described.stderr
    assert json.loads(described.stdout)["under_replicated_ledgers"] == [3, 12]
    text = cluster.run("cluster", "describe", "--metadata-url", zk_url)
    assert text.returncode == 0, text.stderr
    assert text.stdout.splitlines()[-1] == (
        "under-replicated ledgers (2, auto-recovery at work): 3, 12")


async def _write_ledgers(client: LedgerClient, count: int, entries: int) -> list[int]:
    ledger_ids = []
    for _ in range(count):
        handle = await client.create(ensemble_size=3, write_quorum=2, ack_quorum=2)
        for number in range(entries):
            handle.add_async(b"entry-%d-%d" % (handle.ledger_id, number))
        await handle.close()
        ledger_ids.append(handle.ledger_id)
    return ledger_ids


@pytest.mark.timeout(300)
def test_folio_autorecovery_process_serves_bookies_without_workers(
        zookeeper: ZooKeeperServer, zk_url: str, bookie_processes: BookieProcesses,
        tmp_path: Path) -> None:
    cluster = LocalCluster(bookie_processes, zk_url, tmp_path)
    cluster.init()
    bookies = {bookie.address: bookie for bookie in
               (cluster.start_bookie("--no-auto-recovery") for _ in range(4))}
    assert not any("auto-recovery on" in bookie.ready_line for bookie in bookies.values())
    worker = bookie_processes.start_folio(
        ["autorecovery", "--metadata-url", zk_url, "--metrics-port", "0",
         "--metadata-session-timeout-ms", "2000", *RECOVERY_FLAGS], tmp_path / "autorecovery")
    assert worker.ready_line.startswith("folio autorecovery running as autorecovery-")

    async def scenario() -> None:
        store = await ZooKeeperMetadataStore.connect(zk_url)
        directory = RegistryBookieDirectory(store, connect=GrpcBookieClient)
        await directory.start()
        client = LedgerClient(store, directory)
        try:
            ledger_ids = await _write_ledgers(client, 3, 20)
            assert (await store.get(AUDITOR_PATH)).data.startswith(b"autorecovery-")
            first, _ = await client.read_metadata(ledger_ids[0])
            victim, second = first.ensembles[0][1][:2]
            bookies.pop(victim).kill()

            async def restored() -> bool:
                for ledger_id in ledger_ids:
                    metadata, _ = await client.read_metadata(ledger_id)
                    if victim in metadata.ensembles[0][1]:
                        return False
                return True

            await wait_for_async(restored, "the killed bookie replaced in every ledger", 60)
            bookies.pop(second).kill()
            reader = LedgerClient(store, RegistryBookieDirectory(store, connect=GrpcBookieClient))
            for ledger_id in ledger_ids:
                handle = await reader.open(ledger_id)
                assert await handle.read(0, 19) == [
                    b"entry-%d-%d" % (ledger_id, n) for n in range(20)]
            await reader.close()
        finally:
            await client.close()
            await store.close()

    asyncio.run(scenario())
    assert worker.terminate() == 0


def test_folio_autorecovery_refuses_bad_settings_and_uninitialised_clusters(
        zookeeper: ZooKeeperServer) -> None:
    missing_url = run_folio("autorecovery", "--metrics-port", "0")
    assert missing_url.returncode == 2
    assert "--metadata-url (or FOLIO_AUTORECOVERY_METADATA_URL) is required" in \
        missing_url.stderr
    bad_grace = run_folio("autorecovery", "--metadata-url", zookeeper.url("/x"),
                          "--auto-recovery-grace-ms", "-1")
    assert bad_grace.returncode == 2
    assert "auto_recovery_grace_ms must be >= 0" in bad_grace.stderr
    uninitialised = zookeeper.url("/never-initialised")
    done = run_folio("autorecovery", "--metadata-url", uninitialised, "--metrics-port", "0")
    assert done.returncode == 1
    assert f"run `folio cluster init --metadata-url {uninitialised}` first" in done.stderr
    assert "Traceback" not in done.stderr
