"""Transactions across segments through connection cuts, against a real ``folio standalone``.

Writers (threads, each with its own ``transactional_writer``) commit
transactions of ~2 MiB over both segments of a topic (~1 MiB blocks, so a cut
lands while blocks are in flight) and abort some, through a TCP proxy
(``tests/support/proxy.py``) that resets every connection after every few
started commits (cuts are triggered by progress, never by timers). The SDK
resends what the broker had not acknowledged. Afterwards every commit
succeeded, and read_committed shows each committed transaction's events
exactly once and nothing of an aborted one.
"""

from __future__ import annotations

import random
import threading
from collections import Counter

import pytest

import folio
from tests.integration.test_txn import parse, read_topic, txn_payload
from tests.support.bookies import BookieProcess
from tests.support.proxy import CutEvery, TcpProxy

pytestmark = pytest.mark.faults

WRITERS = 3
TXNS_PER_WRITER = 8
MAX_TXNS_PER_WRITER = 40
CUT_EVERY = 2
EVENT_BYTES = 50_000
EVENTS_PER_TXN = 40  # ~2 MiB, over both segments


def test_transactions_across_segments_survive_connection_cuts(server: BookieProcess,
                                                              proxy: TcpProxy) -> None:
    topic = "txn-full-cuts"
    committed: set[tuple[int, int]] = set()
    aborted: set[tuple[int, int]] = set()
    lock = threading.Lock()
    failures: list[BaseException] = []
    cutter = CutEvery(proxy, CUT_EVERY)
    resent: list[int] = []  # per commit: blocks the SDK sent again after a cut

    with folio.Client(proxy.address, timeout_s=30) as client:
        client.create_topic(topic, 2)

        def run(writer_index: int) -> None:
            rng = random.Random(2000 + writer_index)
            try:
                with client.transactional_writer(topic) as writer:
                    txn_index = -1
                    # Until a cut has landed mid-flight (blocks sent again), within a bound.
                    while txn_index + 1 < TXNS_PER_WRITER or (
                            sum(resent) == 0 and txn_index + 1 < MAX_TXNS_PER_WRITER):
                        txn_index += 1
                        txn = writer.begin()
                        for index in range(EVENTS_PER_TXN):
                            txn.write_event(
                                txn_payload(writer_index, txn_index, index, EVENTS_PER_TXN,
                                            size=EVENT_BYTES),
                                routing_key=f"k{index % 7}")
                        if rng.random() < 0.25:
                            txn.abort()
                            with lock:
                                aborted.add((writer_index, txn_index))
                            continue
                        cutter.started()  # cuts land in other writers' commits
                        txn.commit()
                        resent.append(txn.resent_blocks)
                        with lock:
                            committed.add((writer_index, txn_index))
            except BaseException as error:
                failures.append(error)

        threads = [threading.Thread(target=run, args=(n,), name=f"txn-full-{n}")
                   for n in range(WRITERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(180)
            assert not thread.is_alive(), "a writer hung"
        assert not failures, failures
        assert len(cutter.cuts) >= 5, cutter.cuts
        assert proxy.accepted > len(cutter.cuts)  # the client came back after the cuts
        assert committed and aborted
        assert sum(resent) >= 1, resent  # some cuts landed while blocks were in flight

        seen = Counter(parse(event.payload)[:3] for event in read_topic(client, topic))
        expected = Counter((w, t, i) for w, t in committed for i in range(EVENTS_PER_TXN))
        assert seen == expected  # each committed event once; nothing aborted
    # Calls cancelled by the cuts cancel _txnlog writes; none leaves an
    # unretrieved exception behind (issue 13).
    assert "never retrieved" not in server.log()
