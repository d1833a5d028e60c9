"""A bookie that missed a ledger's delete collects its copy once back (real ZooKeeper, processes).

Four ``folio bookie`` processes (E = Qw = 3, Qa = 2) hold two closed ledgers and
one being written. One bookie is SIGKILLed, one closed ledger is deleted (its
metadata goes; the dead bookie's copy is left behind), the bookie is restarted on
its data dir and port with a short ``--gc-interval-ms``, and its garbage collector
drops the copy within the deadline, while the other ledgers' entries stay
readable on every bookie, the open one's writer going on meanwhile.

With ``--gc-over-replicated``: a bookie SIGKILLed for longer than the grace
period is replaced in its ledgers by auto-recovery; restarted, it drops its
copies of them (no ensemble names it any more), and every ledger stays whole.
"""

from __future__ import annotations

import asyncio
import re
import urllib.request
from pathlib import Path

import pytest

from ledger.bookie.remote import GrpcBookieClient
from ledger.client.ledger_client import LedgerClient
from ledger.client.registry_directory import RegistryBookieDirectory
from ledger.errors import NoSuchLedgerError
from ledger.metadata.zookeeper_store import ZooKeeperMetadataStore
from tests.support.bookies import BookieProcess, BookieProcesses
from tests.support.cluster import LocalCluster
from tests.support.wait import wait_for_async
from tests.support.zookeeper import ZooKeeperServer

pytestmark = pytest.mark.faults

GC_FLAGS = ("--gc-interval-ms", "300", "--no-auto-recovery")
ENTRIES = 20


def _entry(ledger_id: int, number: int) -> bytes:
    return b"entry-%d-%d-" % (ledger_id, number) + b"x" * 200


def _metric(bookie: BookieProcess, sample: str) -> float:
    """A sample of the bookie's /metrics (0 if absent)."""
    url = re.search(r"metrics on (http://\S+/metrics)", bookie.ready_line)
    assert url is not None, bookie.ready_line
    with urllib.request.urlopen(url.group(1), timeout=10) as response:
        text = response.read().decode()
    found = re.search(rf"^{re.escape(sample)} (\S+)$", text, re.MULTILINE)
    return 0.0 if found is None else float(found.group(1))


def _gc_metric(bookie: BookieProcess) -> float:
    return _metric(bookie, 'folio_bookie_gc_ledgers_total{reason="deleted"}')


async def _holds(address: str, ledger_id: int) -> bool:
    client = GrpcBookieClient(address)
    try:
        await client.read_last_add_confirmed(ledger_id)
    except NoSuchLedgerError:
        return False
    finally:
        await client.close()
    return True


async def _read_on_each(addresses: list[str], ledger_id: int, last_entry_id: int) -> None:
    for address in addresses:
        client = GrpcBookieClient(address)
        try:
            reply = await client.read_entries(ledger_id, 0, last_entry_id)
            assert reply.datas == [_entry(ledger_id, n) for n in range(last_entry_id + 1)], (
                address, ledger_id)
        finally:
            await client.close()


@pytest.mark.timeout(300)
def test_a_bookie_down_during_a_delete_collects_the_ledger_once_back(
        zookeeper: ZooKeeperServer, zk_url: str, bookie_processes: BookieProcesses,
        tmp_path: Path) -> None:
    cluster = LocalCluster(bookie_processes, zk_url, tmp_path)
    cluster.init(ensemble_size=3, write_quorum=3, ack_quorum=2)
    bookies = {bookie.address: bookie for bookie in
               (cluster.start_bookie(*GC_FLAGS) for _ in range(4))}
    assert all("ledger gc every 300 ms" in bookie.ready_line for bookie in bookies.values())

    async def scenario() -> None:
        store = await ZooKeeperMetadataStore.connect(zk_url)
        directory = RegistryBookieDirectory(store, connect=GrpcBookieClient)
        await directory.start()
        client = LedgerClient(store, directory)
        try:
            closed = []
            for _ in range(2):
                handle = await client.create(ensemble_size=3, write_quorum=3, ack_quorum=2)
                for number in range(ENTRIES):
                    await handle.add(_entry(handle.ledger_id, number))
                await handle.close()
                closed.append(handle.ledger_id)
            gone, live = closed
            writer = await client.create(ensemble_size=3, write_quorum=3, ack_quorum=2)
            for number in range(ENTRIES):
                await writer.add(_entry(writer.ledger_id, number))

            gone_metadata, _ = await client.read_metadata(gone)
            live_metadata, _ = await client.read_metadata(live)
            victim = bookies[gone_metadata.ensembles[0][1][0]]
            assert victim.kill() == -9
            await client.delete(gone)  # the victim's copy is left behind
            assert not await store.exists(f"/ledgers/L{gone:020d}")
            again = cluster.start_bookie(*GC_FLAGS, "--port", str(victim.port),
                                         data_dir=victim.data_dir)
            assert again.address == victim.address

            # The writer goes on (its adds reach the victim again, or it is
            # replaced by the spare bookie: either way its entries stay readable).
            for number in range(ENTRIES, 2 * ENTRIES):
                await writer.add(_entry(writer.ledger_id, number))

            async def collected() -> bool:
                return not await _holds(again.address, gone)

            await wait_for_async(collected, f"ledger {gone} collected on {again.address}", 60)

            async def counted() -> bool:  # once the delete returned to the collector
                return _gc_metric(again) >= 1.0

            await wait_for_async(counted, "the collected ledger counted", 30)
            assert _gc_metric(again) == 1.0
            for address in bookies:
                assert not await _holds(address, gone)

            await _read_on_each(list(live_metadata.ensembles[0][1]), live, ENTRIES - 1)
            reader = LedgerClient(store, RegistryBookieDirectory(store, connect=GrpcBookieClient))
            try:
                handle = await reader.open(live, recovery=False)
                assert await handle.read(0, ENTRIES - 1) == [
                    _entry(live, n) for n in range(ENTRIES)]
                await writer.close()
                handle = await reader.open(writer.ledger_id)
                assert await handle.read(0, 2 * ENTRIES - 1) == [
                    _entry(writer.ledger_id, n) for n in range(2 * ENTRIES)]
            finally:
                await reader.close()
            # Passes went on meanwhile: nothing live was collected.
            for address in live_metadata.ensembles[0][1]:
                assert await _holds(address, live)
        finally:
            await client.close()
            await store.close()

    asyncio.run(scenario())
    # The bookies that took the delete had nothing to collect.
    others = [bookie for bookie in bookies.values() if bookie.running()]
    assert len(others) == 3
    assert [_gc_metric(bookie) for bookie in others] == [0.0, 0.0, 0.0]


@pytest.mark.timeout(300)
def test_a_bookie_taken_for_lost_drops_its_over_replicated_copies_once_back(
        zookeeper: ZooKeeperServer, zk_url: str, bookie_processes: BookieProcesses,
        tmp_path: Path) -> None:
    flags = ("--gc-interval-ms", "300", "--gc-over-replicated",
             "--auto-recovery-grace-ms", "1000", "--auto-recovery-interval-ms", "300")
    cluster = LocalCluster(bookie_processes, zk_url, tmp_path)
    cluster.init(ensemble_size=3, write_quorum=3, ack_quorum=2)
    bookies = {bookie.address: bookie for bookie in
               (cluster.start_bookie(*flags) for _ in range(4))}

    async def scenario() -> None:
        store = await ZooKeeperMetadataStore.connect(zk_url)
        directory = RegistryBookieDirectory(store, connect=GrpcBookieClient)
        await directory.start()
        client = LedgerClient(store, directory)
        try:
            ledger_ids = []
            for _ in range(3):
                handle = await client.create(ensemble_size=3, write_quorum=3, ack_quorum=2)
                for number in range(ENTRIES):
                    await handle.add(_entry(handle.ledger_id, number))
                await handle.close()
                ledger_ids.append(handle.ledger_id)
            first, _ = await client.read_metadata(ledger_ids[0])
            victim = bookies[first.ensembles[0][1][0]]
            held = [ledger_id for ledger_id in ledger_ids
                    if await _holds(victim.address, ledger_id)]
            assert victim.kill() == -9

            async def swapped_out() -> bool:
                for ledger_id in held:
                    metadata, _ = await client.read_metadata(ledger_id)
                    if any(victim.address in ids for _, ids in metadata.ensembles):
                        return False
                return True

            await wait_for_async(swapped_out, "the lost bookie replaced in every ledger", 90)
            again = cluster.start_bookie(*flags, "--port", str(victim.port),
                                         data_dir=victim.data_dir)

            async def dropped() -> bool:
                return not any([await _holds(again.address, ledger_id) for ledger_id in held])

            await wait_for_async(dropped, "the returning bookie's copies dropped", 60)
            over = 'folio_bookie_gc_ledgers_total{reason="over_replicated"}'

            async def counted() -> bool:
                # Counted once the delete returned to the collector: a moment
                # after the copy is gone for the test's reads.
                return _metric(again, over) >= len(held)

            await wait_for_async(counted, "the dropped copies counted", 30)
            assert _metric(again, over) == len(held)
            for ledger_id in ledger_ids:
                metadata, _ = await client.read_metadata(ledger_id)
                await _read_on_each(list(metadata.ensembles[0][1]), ledger_id, ENTRIES - 1)
        finally:
            await client.close()
            await store.close()

    asyncio.run(scenario())
