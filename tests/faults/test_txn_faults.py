"""Single-routing-key transactions across broken connections, against a real ``folio standalone``.

Several writers (threads, each with its own transaction writer; pairs of them
share a routing key, so their transactions interleave on one segment) commit
multi-block transactions (~3 MiB in ~1 MiB blocks, so a cut lands in the
middle of a block sequence) and small ones, and abort some, through a TCP
proxy (``tests/support/proxy.py``) that resets every connection right after
every few commits start (cuts are triggered by progress, never by timers).
Afterwards: every commit succeeded; readers never see a partial
transaction, never an aborted one, and every committed one exactly once, at
consecutive offsets. The flows' counters show that transactions were sent
again whole after cuts.
"""

from __future__ import annotations

import random
import threading

import pytest

import folio
from tests.integration.test_txn import check_transactions, read_topic, txn_payload
from tests.support.bookies import BookieProcess
from tests.support.proxy import CutEvery, TcpProxy

pytestmark = pytest.mark.faults

WRITERS = 4
TXNS_PER_WRITER = 16
#: Every this many started commits (over all writers), the proxy cuts.
CUT_EVERY = 2
COMMIT_TIMEOUT_S = 60.0
BIG_EVENT_BYTES = 100_000






def test_transactions_survive_connection_cuts_mid_commit(server: BookieProcess,
                                                         proxy: TcpProxy) -> None:
    topic = "txn-cuts"
    committed: dict[tuple[int, int], folio.TransactionResult] = {}
    aborted: set[tuple[int, int]] = set()
    lock = threading.Lock()
    failures: list[BaseException] = []
    cutter = CutEvery(proxy, CUT_EVERY)
    resent: list[int] = []
    settled: list[int] = []

    with folio.Client(proxy.address, timeout_s=30) as client:
        client.create_topic(topic, 2)

        def run(writer_index: int) -> None:
            rng = random.Random(1000 + writer_index)
            try:
                with client.single_routing_key_txn_writer(
                        topic, f"key-{writer_index // 2}") as writer:
                    for txn_index in range(TXNS_PER_WRITER):
                        name = (writer_index, txn_index)
                        big = txn_index % 2 == 0
                        count = 30 if big else rng.randint(1, 50)
                        size = BIG_EVENT_BYTES if big else 60
                        txn = writer.begin()
                        for index in range(count):
                            txn.write_event(txn_payload(writer_index, txn_index, index, count,
                                                        size=size))
                        if rng.random() < 0.2:
                            txn.abort()
                            with lock:
                                aborted.add(name)
                            continue
                        future = txn.commit_async()
                        cutter.started()
                        result = future.result(COMMIT_TIMEOUT_S)
                        with lock:
                            committed[name] = result
                    resent.append(writer._flow.resent)
                    settled.append(writer._flow.settled_by_setup)
            except BaseException as error:
                failures.append(error)

        threads = [threading.Thread(target=run, args=(n,), name=f"txn-writer-{n}")
                   for n in range(WRITERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
            assert not thread.is_alive(), "a writer hung"
        assert not failures, failures
        assert len(cutter.cuts) >= 15 and sum(cutter.cuts) >= 15, cutter.cuts
        assert proxy.accepted > len(cutter.cuts)  # the client came back after the cuts
        # Cuts landed in commits: some were sent again whole, and some were
        # found written by the next AppendSetup (their acknowledgement lost).
        assert sum(resent) >= 1 and sum(settled) >= 1, (cutter.cuts, resent, settled)
        assert aborted and len(committed) + len(aborted) == WRITERS * TXNS_PER_WRITER
        check_transactions(read_topic(client, topic), committed, aborted)
