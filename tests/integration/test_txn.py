"""Single-routing-key transactions (PDP-44) against a real ``folio standalone`` process.

One server per module; each test uses topics of its own. A committed
transaction is read back whole at consecutive offsets (one multi-block
transaction included, written by the broker as one entry); an aborted one is
never read; many transactions committed and aborted concurrently from
several writers and threads, beside plain writes to the same keys, come back
each exactly once and contiguous, the aborted ones never. The ~10 MiB
transaction test needs the broker to take a 16 MiB transaction as one entry.
"""

from __future__ import annotations

import random
import threading
import time
from collections import defaultdict

import folio

MiB = 1024 * 1024
READ_TIMEOUT_S = 30.0
COMMIT_TIMEOUT_S = 30.0






def read_topic(client: folio.Client, topic: str) -> list[folio.Event[bytes]]:
    """Every event the topic's segments hold now (fails if they do not all come in time)."""
    ends = {s.name: s.end_offset for s in client.get_segments(topic)}
    count = sum(ends.values())
    events: list[folio.Event[bytes]] = []
    deadline = time.monotonic() + READ_TIMEOUT_S
    with client.reader(topic) as reader:
        while len(events) < count:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"read {len(events)} of {count} events in {READ_TIMEOUT_S} s"
            event = reader.read_next(timeout=remaining)
            if event is not None:
                events.append(event)
        assert reader.positions == ends
    return events


def txn_payload(writer: int, txn: int, index: int, count: int, size: int = 40) -> bytes:
    """Event ``index`` of ``count`` of transaction ``txn`` of writer ``writer``."""
    return f"T|{writer}|{txn}|{index}|{count}|".encode().ljust(size, b".")


def parse(payload: bytes) -> tuple[int, int, int, int]:
    _, writer, txn, index, count = payload.split(b"|")[:5]
    return int(writer), int(txn), int(index), int(count)


def check_transactions(events: list[folio.Event[bytes]],
                       committed: dict[tuple[int, int], folio.TransactionResult],
                       aborted: set[tuple[int, int]]) -> None:
    """Each committed transaction once, whole, at consecutive offsets; no aborted one."""
    found: dict[tuple[int, int], list[folio.Event[bytes]]] = defaultdict(list)
    for event in events:
        if event.payload.startswith(b"T|"):
            writer, txn, _, _ = parse(event.payload)
            found[writer, txn].append(event)
    assert not aborted & set(found), f"aborted transactions read: {sorted(aborted & set(found))}"
    assert set(found) == set(committed), (
        f"missing {sorted(set(committed) - set(found))[:5]}, "
        f"unexpected {sorted(set(found) - set(committed))[:5]}")
    for name, txn_events in found.items():
        count = parse(txn_events[0].payload)[3]
        assert [parse(e.payload)[2] for e in txn_events] == list(range(count)), \
            f"transaction {name}: events lost, duplicated or out of order"
        assert len({e.segment for e in txn_events}) == 1
        first = txn_events[0].offset
        assert [e.offset for e in txn_events] == list(range(first, first + count)), \
            f"transaction {name} is not contiguous"
        result = committed[name]
        assert result.segment == txn_events[0].segment
        assert result.offset in (-1, first)
        assert result.event_count == count


def test_commit_is_read_back_whole_at_consecutive_offsets(client: folio.Client) -> None:
    client.create_topic("txn-basic", 3)
    with client.single_routing_key_txn_writer("txn-basic", "customer-7") as writer:
        txn = writer.begin()
        for index in range(50):
            txn.write_event(txn_payload(0, 0, index, 50), headers={"n": b"%d" % index})
        result = txn.commit(timeout=COMMIT_TIMEOUT_S)
        assert result.segment == writer.segment and result.event_count == 50
        # A transaction of three ~1 MiB blocks: one entry on the broker.
        big = writer.begin()
        for index in range(30):
            big.write_event(txn_payload(0, 1, index, 30, size=100_000))
        big_result = big.commit(timeout=COMMIT_TIMEOUT_S)
    events = read_topic(client, "txn-basic")
    assert len(events) == 80
    assert [e.offset for e in events] == list(range(80))
    assert all(e.routing_key == "customer-7" and e.segment == result.segment for e in events)
    assert [e.headers for e in events[:50]] == [{"n": b"%d" % i} for i in range(50)]
    check_transactions(events, {(0, 0): result, (0, 1): big_result}, set())
    assert (result.offset, big_result.offset) == (0, 50)


def test_abort_writes_nothing(client: folio.Client) -> None:
    client.create_topic("txn-abort", 1)
    with client.single_routing_key_txn_writer("txn-abort", "k") as writer:
        txn = writer.begin()
        for index in range(10):
            txn.write_event(txn_payload(0, 0, index, 10))
        txn.abort()
        kept = writer.begin()
        kept.write_event(txn_payload(0, 1, 0, 1))
        result = kept.commit(timeout=COMMIT_TIMEOUT_S)
    assert result.offset == 0  # the aborted one took no offsets
    events = read_topic(client, "txn-abort")
    check_transactions(events, {(0, 1): result}, {(0, 0)})


def test_concurrent_transactions_from_many_writers_some_aborted(client: folio.Client) -> None:
    topic = "txn-concurrent"
    client.create_topic(topic, 3)
    writers, txns_each = 8, 25
    committed: dict[tuple[int, int], folio.TransactionResult] = {}
    aborted: set[tuple[int, int]] = set()
    lock = threading.Lock()
    failures: list[BaseException] = []

    def run(writer_index: int) -> None:
        rng = random.Random(writer_index)
        # Keys shared by pairs of writers, so transactions of different
        # writers interleave on the same segment.
        key = f"key-{writer_index // 2}"
        try:
            with client.single_routing_key_txn_writer(topic, key) as writer, \
                    client.writer(topic) as plain:
                futures = []
                for txn_index in range(txns_each):
                    count = rng.randint(1, 40)
                    txn = writer.begin()
                    for index in range(count):
                        txn.write_event(txn_payload(writer_index, txn_index, index, count))
                        if rng.random() < 0.2:  # plain events of the same key in between
                            plain.write_event(b"plain", key)
                    name = (writer_index, txn_index)
                    if rng.random() < 0.25:
                        txn.abort()
                        with lock:
                            aborted.add(name)
                    else:
                        futures.append((name, txn.commit_async()))
                for name, future in futures:
                    result = future.result(COMMIT_TIMEOUT_S)
                    with lock:
                        committed[name] = result
                plain.flush(COMMIT_TIMEOUT_S)
        except BaseException as error:
            failures.append(error)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
        assert not thread.is_alive()
    assert not failures, failures
    assert aborted and committed
    check_transactions(read_topic(client, topic), committed, aborted)


def test_a_ten_mib_transaction_is_one_entry(client: folio.Client) -> None:
    """Needs the broker to take a transaction of up to 16 MiB as one ledger entry."""
    client.create_topic("txn-large", 1)
    with client.single_routing_key_txn_writer("txn-large", "k") as writer:
        txn = writer.begin()
        for index in range(105):
            txn.write_event(txn_payload(0, 0, index, 105, size=100 * 1024))
        assert txn.size > 10 * MiB
        result = txn.commit(timeout=COMMIT_TIMEOUT_S)
    check_transactions(read_topic(client, "txn-large"), {(0, 0): result}, set())
