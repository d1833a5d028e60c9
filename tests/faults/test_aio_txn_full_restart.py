"""``folio.aio`` transactions across segments through a SIGKILLed and restarted standalone.

One ``AsyncClient`` (through a TCP proxy, retargeted to the restarted
process) holds transactions in every state when the broker is killed: one
committed, one flushed and left open to commit after the restart, one
flushed to abort after it, one whose commit is under way, and one whose
commit the caller cancelled; the last two with every block stored and its
acknowledgement held by the proxy, so the kill loses them (deterministically;
small events: HTTP/2's window updates are held too). After the restart on
the same data dir each
ends as asked (the open ones from the replayed coordinator log, the commit
under way by its flows resending what was in doubt and its ``CommitTxn``
made again), and ``read_committed`` shows every committed transaction's
events exactly once and nothing of the aborted one, up to a sentinel per
segment (which also proves nothing was left open).
"""

from __future__ import annotations

import asyncio
import signal
from collections import Counter

import pytest

import folio
from folio.aio import AsyncClient, AsyncFullTransaction
from tests.integration.test_aio_txn_full import KEYS, committed_payloads
from tests.support.bookies import BookieProcess, BookieProcesses
from tests.support.proxy import TcpProxy
from tests.support.standalone import start_standalone
from tests.support.wait import wait_for_async

pytestmark = pytest.mark.faults

TOPIC = "aio-full-kill"


def _events(name: str, count: int, size: int = 40) -> list[bytes]:
    return [f"{name}|{n}|".encode().ljust(size, b".") for n in range(count)]


def _write(txn: AsyncFullTransaction[bytes], events: list[bytes]) -> None:
    for n, payload in enumerate(events):
        txn.write_event(payload, routing_key=KEYS[n % len(KEYS)])


async def _stored(server: BookieProcess) -> int:
    """Events the broker holds in the topic's segments, committed or not (asked directly,
    not through the proxy)."""
    async with AsyncClient(server.address, timeout_s=10) as direct:
        return sum(s.end_offset for s in await direct.get_segments(TOPIC))


@pytest.mark.timeout(300)
async def test_every_transaction_ends_as_asked_across_a_sigkill(
        server: BookieProcess, proxy: TcpProxy, bookie_processes: BookieProcesses) -> None:
    committed, to_commit = _events("committed", 20), _events("to-commit", 20)
    to_abort = _events("to-abort", 20)
    in_flight, cancelled = _events("in-flight", 100), _events("cancelled", 100)
    async with AsyncClient(proxy.address, timeout_s=10) as client:
        await client.create_topic(TOPIC, segments=2)
        writer = await client.transactional_writer(TOPIC, txn_timeout_ms=120_000)
        first = await writer.begin()
        _write(first, committed)
        await first.commit()
        open_one, aborting = await writer.begin(), await writer.begin()
        _write(open_one, to_commit)
        _write(aborting, to_abort)
        await open_one.flush()
        await aborting.flush()
        committing, abandoned = await writer.begin(), await writer.begin()
        firsts = {txn: _events(f"first-{txn.txn_id.hex()}", len(KEYS))
                  for txn in (committing, abandoned)}
        for txn, events in firsts.items():  # a flow set up on each segment, a batch written
            _write(txn, events)
            await txn.flush()
        landed = await _stored(server)
        # From here the broker takes what is sent and its answers are held: the
        # kill then loses the acknowledgements of blocks the broker has, so after
        # the restart each flow learns from its setup what landed (never twice).
        await asyncio.to_thread(proxy.hold_answers)
        _write(committing, in_flight)
        _write(abandoned, cancelled)
        under_way = asyncio.ensure_future(committing.commit())
        waiting = asyncio.ensure_future(abandoned.commit())
        await asyncio.sleep(0)  # both commits begun: their blocks are on their way
        waiting.cancel()

        async def all_landed() -> bool:
            return await _stored(server) == landed + len(in_flight) + len(cancelled)
        await wait_for_async(all_landed, "the blocks of both commits stored, unanswered", 60)
        assert not under_way.done()
        assert await asyncio.to_thread(server.kill) == -signal.SIGKILL
        restarted = await asyncio.to_thread(start_standalone, bookie_processes,
                                            server.data_dir)
        await asyncio.to_thread(proxy.retarget, restarted.port)
        await asyncio.to_thread(proxy.hold_answers, False)
        await asyncio.to_thread(proxy.cut)

        await open_one.commit()
        await aborting.abort()
        await under_way  # ended: committed whole (blocks in doubt settled or resent)
        with pytest.raises(asyncio.CancelledError):
            await waiting

        async def decided() -> bool:
            return (await abandoned.status()) is not folio.TxnStatus.OPEN
        await wait_for_async(decided, "the cancelled commit deciding", 120)
        assert (await abandoned.status()).committed
        assert (await open_one.status()).committed and (await committing.status()).committed
        assert (await aborting.status()).aborted
        await writer.close()

        assert committing.resent_blocks == abandoned.resent_blocks == 0  # settled by setup
        got = Counter(await committed_payloads(client, TOPIC, b"sentinel"))
        assert got == Counter([*committed, *to_commit, *firsts[committing], *firsts[abandoned],
                               *in_flight, *cancelled])

        async def released() -> bool:
            return client.pool_stats().flows == 0
        await wait_for_async(released, "every flow released")
    assert await asyncio.to_thread(restarted.terminate) == 0
