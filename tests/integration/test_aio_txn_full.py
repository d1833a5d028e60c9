"""``folio.aio`` transactions across segments against a real standalone, on the test's loop.

Committed transactions are read whole and once, aborted ones never (up to a
sentinel per segment, which also proves nothing was left open); a body that
raises or is cancelled aborts; a cancelled commit still ends and says how;
the typed errors are the blocking face's; the flows are released.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

import folio
from folio.aio import AsyncClient
from folio.api.v1 import transactions_pb2
from tests.support.bookies import BookieProcess
from tests.support.catch_up import _key_in
from tests.support.wait import wait_for_async

KEYS = [f"key-{n}" for n in range(8)]  # over both segments


async def committed_payloads(client: AsyncClient, topic: str, sentinel: bytes,
                             timeout_s: float = 60.0) -> list[bytes]:
    """The payloads ``read_committed`` shows before each segment's ``sentinel``.

    A sentinel is written to each active segment with a plain writer and a
    fresh reader reads until every one arrived: a transaction left open would
    hold it before them (the test then fails), so this also proves every
    transaction was decided.
    """
    segments = await client.get_segments(topic)
    writer = await client.writer(topic)
    for segment in segments:
        await writer.write(sentinel, routing_key=_key_in(segment))
    await writer.close()
    missing = {segment.name for segment in segments}
    others: list[bytes] = []
    reader = await client.reader(topic)
    try:
        async with asyncio.timeout(timeout_s):
            async for event in reader:
                if event.payload == sentinel and event.segment in missing:
                    missing.discard(event.segment)
                    if not missing:
                        break
                else:
                    others.append(event.payload)
    finally:
        reader.close()
    return others


async def _flows_released(client: AsyncClient) -> None:
    async def released() -> bool:
        return client.pool_stats().flows == 0
    await wait_for_async(released, "every transaction flow released")


async def test_commit_abort_and_async_with(server: BookieProcess) -> None:
    async with AsyncClient(server.address, timeout_s=30) as client:
        await client.create_topic("aio-full", segments=2)
        async with await client.transactional_writer("aio-full") as writer:
            txn = await writer.begin()
            for n, key in enumerate(KEYS):
                txn.write_event(b"a%d" % n, routing_key=key)
            await txn.flush()
            assert await txn.status() is folio.TxnStatus.OPEN
            await txn.commit()
            assert await txn.status() is folio.TxnStatus.COMMITTED
            assert (await client.transaction_status(txn.txn_id)).committed
            with pytest.raises(folio.TxnStateError):
                txn.write_event(b"late")

            dropped = await writer.begin()
            for key in KEYS:
                dropped.write_event(b"never", routing_key=key)
            await dropped.flush()
            await dropped.abort()
            assert (await dropped.status()).aborted

            async with await writer.begin() as third:
                third.write_event(b"b1", routing_key="x")
                third.write_event(b"b2")  # keyless: rotation
            assert await third.status() is folio.TxnStatus.COMMITTED

            with pytest.raises(RuntimeError):
                async with await writer.begin() as failed:
                    failed.write_event(b"never either", routing_key="y")
                    await failed.flush()
                    raise RuntimeError("the body failed: aborted")
            assert await failed.status() is folio.TxnStatus.ABORTED
            assert failed.resent_blocks == 0

        await _flows_released(client)
        got = await committed_payloads(client, "aio-full", b"sentinel")
        assert Counter(got) == Counter([*(b"a%d" % n for n in range(8)), b"b1", b"b2"])


async def test_a_cancelled_body_aborts(server: BookieProcess) -> None:
    async with AsyncClient(server.address, timeout_s=30) as client:
        await client.create_topic("aio-full-body", segments=2)
        writer = await client.transactional_writer("aio-full-body")
        began: asyncio.Future[folio.aio.AsyncFullTransaction[bytes]] = \
            asyncio.get_running_loop().create_future()

        async def body() -> None:
            async with await writer.begin() as txn:
                for key in KEYS:
                    txn.write_event(b"cancelled", routing_key=key)
                await txn.flush()
                began.set_result(txn)
                await asyncio.Event().wait()  # until cancelled

        task = asyncio.ensure_future(body())
        txn = await began
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert (await txn.status()).aborted
        await writer.close()
        assert await committed_payloads(client, "aio-full-body", b"sentinel") == []
        await _flows_released(client)


async def test_a_cancelled_commit_still_ends_whole_once(server: BookieProcess) -> None:
    async with AsyncClient(server.address, timeout_s=30) as client:
        await client.create_topic("aio-full-cancel", segments=2)
        writer = await client.transactional_writer("aio-full-cancel")
        txn = await writer.begin()
        payloads = [b"%d" % n + b"." * 20_000 for n in range(200)]  # ~4 MiB: several blocks
        for n, payload in enumerate(payloads):
            txn.write_event(payload, routing_key=KEYS[n % len(KEYS)])
        waiting = asyncio.ensure_future(txn.commit())
        await asyncio.sleep(0)  # the commit has begun: its blocks are on their way
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting

        async def decided() -> bool:
            return (await txn.status()) is not folio.TxnStatus.OPEN
        await wait_for_async(decided, "the cancelled commit deciding")
        assert (await txn.status()).committed  # COMMITTING or COMMITTED: it will be visible
        await txn.commit()  # again: it committed, so it returns
        with pytest.raises(folio.TxnStateError):
            txn.write_event(b"late")
        await writer.close()
        got = await committed_payloads(client, "aio-full-cancel", b"sentinel")
        assert Counter(got) == Counter(payloads)
        await _flows_released(client)


async def test_a_cancelled_flush_is_waited_for_by_the_commit(server: BookieProcess) -> None:
    async with AsyncClient(server.address, timeout_s=30) as client:
        await client.create_topic("aio-full-flush", segments=2)
        async with await client.transactional_writer("aio-full-flush") as writer:
            txn = await writer.begin()
            payloads = [b"f%d" % n + b"." * 20_000 for n in range(100)]
            for n, payload in enumerate(payloads):
                txn.write_event(payload, routing_key=KEYS[n % len(KEYS)])
            flushing = asyncio.ensure_future(txn.flush())
            await asyncio.sleep(0)
            flushing.cancel()
            with pytest.raises(asyncio.CancelledError):
                await flushing
            await txn.commit()  # nothing new to send: it waits for the flushed blocks
        assert Counter(await committed_payloads(client, "aio-full-flush", b"s")) == \
            Counter(payloads)


async def test_timeouts_and_typed_errors(server: BookieProcess) -> None:
    async with AsyncClient(server.address, timeout_s=30) as client:
        await client.create_topic("aio-full-errors", segments=2, max_event_bytes=1024)
        with pytest.raises(folio.TopicNotFoundError):
            await client.transactional_writer("aio-full-none")
        with pytest.raises(folio.InvalidArgumentError, match="txn_timeout_ms"):
            await client.transactional_writer("aio-full-errors", txn_timeout_ms=0)
        writer = await client.transactional_writer("aio-full-errors", txn_timeout_ms=1_000)
        txn = await writer.begin()
        with pytest.raises(folio.EventTooLargeError):
            txn.write_event(b"x" * 2048)
        txn.write_event(b"expired", routing_key="a")
        await txn.flush()

        async def timed_out() -> bool:  # OPEN, then ABORTING while its markers are written
            return (await txn.status()) not in (folio.TxnStatus.OPEN,
                                                 folio.TxnStatus.ABORTING)
        await wait_for_async(timed_out, "the 1 s timeout aborting the transaction")
        assert await txn.status() is folio.TxnStatus.TIMED_OUT
        with pytest.raises(folio.TxnStateError) as refused:
            await txn.commit()
        assert refused.value.actual == "TIMED_OUT"
        with pytest.raises(folio.InvalidArgumentError):
            await writer.begin(label="x" * 300)
        ghost = folio.aio.AsyncFullTransaction(writer, b"\x01" * 16)
        with pytest.raises(folio.TxnNotFoundError):
            await ghost.commit()
        left_open = await writer.begin()
        left_open.write_event(b"left open", routing_key="b")
        await left_open.flush()
        await writer.close()  # aborts what is open
        assert await left_open.status() is folio.TxnStatus.ABORTED
        with pytest.raises(folio.WriterClosedError):
            await writer.begin()
        assert await committed_payloads(client, "aio-full-errors", b"sentinel") == []


async def test_client_close_aborts_open_transactions(server: BookieProcess) -> None:
    async with AsyncClient(server.address, timeout_s=30) as client:
        await client.create_topic("aio-full-close", segments=2)
        writer = await client.transactional_writer("aio-full-close")
        txn = await writer.begin()
        txn.write_event(b"open at close", routing_key="a")
        await txn.flush()
    assert writer.closed
    async with AsyncClient(server.address, timeout_s=30) as other:
        assert await other.transaction_status(txn.txn_id) is folio.TxnStatus.ABORTED
        assert await committed_payloads(other, "aio-full-close", b"sentinel") == []


async def test_detach_hands_the_transaction_to_commit_transactions(
        server: BookieProcess) -> None:
    async with AsyncClient(server.address, timeout_s=30) as client:
        await client.create_topic("aio-full-detach", segments=2)
        async with await client.transactional_writer("aio-full-detach") as writer:
            txn = await writer.begin(label="job-1")
            for key in KEYS:
                txn.write_event(key.encode(), routing_key=key)
            txn_id = await txn.detach()
            with pytest.raises(folio.TxnStateError):
                txn.write_event(b"late")
        # closing the writer left it open: another committer decides it
        assert await client.transaction_status(txn_id) is folio.TxnStatus.OPEN
        assert await client.commit_transactions([txn_id])
        assert Counter(await committed_payloads(client, "aio-full-detach", b"s")) == \
            Counter(key.encode() for key in KEYS)


async def test_transactions_across_a_scale(server: BookieProcess) -> None:
    # As the blocking face's: flushed before the seal, the commit lands; routed to
    # the sealed segment, TxnFailedError (retriable), and the next goes to the successors.
    topic = "aio-full-scale"
    async with AsyncClient(server.address, timeout_s=30) as client:
        await client.create_topic(topic, segments=1)
        async with await client.transactional_writer(topic) as writer:
            flushed = await writer.begin()
            flushed.write_event(b"before-seal", routing_key="a")
            await flushed.flush()
            stale = await writer.begin()
            stale.write_event(b"never", routing_key="b")
            await client.scale_topic(topic, seal=[f"{topic}/0"],
                                     new_ranges=[(0.0, 0.5), (0.5, 1.0)])
            await flushed.commit()  # its marker goes to the sealed segment
            with pytest.raises(folio.TxnFailedError) as failed:
                await stale.commit()
            assert failed.value.retriable
            fresh = await writer.begin()
            for n in range(10):
                fresh.write_event(f"after-{n}".encode(), routing_key=f"k{n}")
            await fresh.commit()
        segments = await client.get_segments(topic, include_sealed=True)
        assert [s.sealed for s in segments] == [True, False, False]
        assert sum(s.end_offset for s in segments[1:]) == 10
        assert Counter(await committed_payloads(client, topic, b"sentinel")) == \
            Counter([b"before-seal", *(f"after-{n}".encode() for n in range(10))])


async def test_a_cancelled_begin_leaves_nothing_open(server: BookieProcess) -> None:
    async with AsyncClient(server.address, timeout_s=30) as client:
        await client.create_topic("aio-full-begin", segments=2)
        writer = await client.transactional_writer("aio-full-begin", txn_timeout_ms=3_600_000)
        beginning = asyncio.ensure_future(writer.begin(label="cancelled-begin"))
        await asyncio.sleep(0)  # its BeginTxn is on its way (a task of the writer)
        beginning.cancel()
        with pytest.raises(asyncio.CancelledError):
            await beginning
        await writer.close()  # waits for the writer's tasks: the BeginTxn, then its abort
        # What the label still has open (this call aborts it: the test's last look):
        # nothing, the transaction the BeginTxn opened was aborted, not left for an hour.
        assert await client.abort_transactions("cancelled-begin") == []


async def test_a_cancelled_close_still_aborts_what_is_open(server: BookieProcess) -> None:
    async with AsyncClient(server.address, timeout_s=30) as client:
        await client.create_topic("aio-full-close-cancel", segments=2)
        writer = await client.transactional_writer("aio-full-close-cancel")
        txns = [await writer.begin() for _ in range(3)]
        for txn in txns:
            for key in KEYS:
                txn.write_event(b"open at close", routing_key=key)
            await txn.flush()
        committing = await writer.begin()
        payloads = [b"c%d" % n + b"." * 20_000 for n in range(100)]
        for n, payload in enumerate(payloads):
            committing.write_event(payload, routing_key=KEYS[n % len(KEYS)])
        under_way = asyncio.ensure_future(committing.commit())
        await asyncio.sleep(0)
        closing = asyncio.ensure_future(writer.close())  # waits for the commit first
        await asyncio.sleep(0)
        closing.cancel()
        with pytest.raises(asyncio.CancelledError):
            await closing
        assert writer.closed

        async def all_aborted() -> bool:
            return all([(await txn.status()).aborted for txn in txns])
        await wait_for_async(all_aborted, "the cancelled close aborting every open transaction")
        await under_way
        await writer.close()  # waits for the closing, or returns once it ended
        assert Counter(await committed_payloads(client, "aio-full-close-cancel",
                                                b"sentinel")) == Counter(payloads)
        await _flows_released(client)


@pytest.mark.parametrize("commit", [False, True], ids=["abort", "commit"])
async def test_a_decision_whose_answer_is_lost_is_read_back(
        server: BookieProcess, monkeypatch: pytest.MonkeyPatch, commit: bool) -> None:
    # As the blocking face's test: a fault wrapper at the call seam lets the real
    # broker take the decision, then loses its answer (an unknown outcome), which
    # must be read back (GetTxnStatus), not raised.
    topic = f"aio-full-lost-{'commit' if commit else 'abort'}"
    async with AsyncClient(server.address, timeout_s=30) as client:
        await client.create_topic(topic, segments=2)
        async with await client.transactional_writer(topic) as writer:
            admin = writer._admin
            real = admin._call
            lost: list[str] = []

            async def losing(method: Any, request: Any, *, retry: bool = False) -> Any:
                answer = await real(method, request, retry=retry)
                if isinstance(request, transactions_pb2.CommitTxnRequest |
                              transactions_pb2.AbortTxnRequest) and not lost:
                    lost.append(type(request).__name__)
                    raise TimeoutError("no answer within 35.0 s")
                return answer

            monkeypatch.setattr(admin, "_call", losing)
            txn = await writer.begin()
            for key in KEYS:
                txn.write_event(key.encode(), routing_key=key)
            if commit:
                await txn.commit()
            else:
                await txn.flush()
                await txn.abort()
            assert lost == ["CommitTxnRequest" if commit else "AbortTxnRequest"]
            assert await txn.status() is (folio.TxnStatus.COMMITTED if commit
                                          else folio.TxnStatus.ABORTED)
        got = await committed_payloads(client, topic, b"sentinel")
        assert Counter(got) == (Counter(key.encode() for key in KEYS) if commit else Counter())
