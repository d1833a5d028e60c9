"""NATS JetStream through ``nats-py`` for ``bench.peers``: a writer and a reader.

Stream: one per run, file storage, one subject. Writer: ``publish_async``
with up to ``pipeline`` publishes awaiting their PubAck (the server's
"stored" acknowledgement), as a JetStream producer with async publishing
does; an event counts once its PubAck came. Reader: an ordered push consumer
(ack policy none, flow control), from the first message (catch-up) or new
messages only (end-to-end latency).

Durability: nats-server 2.9 acknowledges a publish once written to the file
store's buffers; it does not fsync before the acknowledgement (``bench.peers``
counts its fsync calls when strace is available).
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable

import nats
from nats.aio.msg import Msg
from nats.js.api import DeliverPolicy, StorageType

from bench._peer_common import (
    TIMESTAMP_BYTES,
    ProduceResult,
    ReadLoad,
    ReadResult,
    WriteLoad,
    filler_bytes,
    group_size,
    stamped_payload,
    wall_us,
)
from folio.cli._perf_consume import SAMPLE_EVERY
from folio.cli._perf_stats import new_histogram, record_us

__all__ = ["create_stream", "produce", "read", "subject"]


def subject(stream: str) -> str:
    """The one subject of ``stream``."""
    return f"{stream}.events"


async def _create(endpoint: str, stream: str) -> None:
    connection = await nats.connect(f"nats://{endpoint}")
    try:
        await connection.jetstream().add_stream(
            name=stream, subjects=[subject(stream)], storage=StorageType.FILE)
    finally:
        await connection.close()


def create_stream(endpoint: str, stream: str) -> None:
    """Create the file-storage stream ``stream`` with its one subject."""
    asyncio.run(_create(endpoint, stream))


async def _produce(load: WriteLoad, ready: Callable[[], None]) -> ProduceResult:
    connection = await nats.connect(f"nats://{load.endpoint}")
    js = connection.jetstream(publish_async_max_pending=load.pipeline)
    to = subject(load.stream)
    k = group_size(load.rate)
    histogram = new_histogram()
    filler = filler_bytes(load.event_bytes)
    acknowledged = 0
    sent = 0
    failure: str | None = None
    interval_ns = int(k * 1e9 / load.rate) if load.rate > 0 else 0
    clock = time.perf_counter_ns

    def done(first_ns: int, future: asyncio.Future[object]) -> None:
        nonlocal acknowledged, failure
        if future.cancelled() or future.exception() is not None:
            failure = failure or repr(future.exception())
            return
        record_us(histogram, (clock() - first_ns) // 1000, k)
        acknowledged += k

    publish = js.publish_async
    ready()
    start_ns = clock()
    end_ns = start_ns + int(load.duration_s * 1e9)
    next_send_ns = start_ns
    try:
        while (first_ns := clock()) < end_ns:
            payload = stamped_payload(filler)
            future = None
            for _ in range(k):
                future = await publish(to, payload)
            assert future is not None
            future.add_done_callback(functools.partial(done, first_ns))
            sent += k
            if interval_ns:
                next_send_ns += interval_ns
                delay_ns = next_send_ns - clock()
                if delay_ns > 0:
                    await asyncio.sleep(delay_ns / 1e9)
        await asyncio.wait_for(js.publish_async_completed(), 60)
    except Exception as error:
        failure = failure or f"{type(error).__name__}: {error}"
    finish_ns = clock()
    await connection.close()
    return ProduceResult(acknowledged, sent, (finish_ns - start_ns) / 1e9,
                         histogram.encode(), failure)


def produce(load: WriteLoad, ready: Callable[[], None]) -> ProduceResult:
    """One JetStream writer (a ``bench._peer_common.Job`` function)."""
    return asyncio.run(_produce(load, ready))


async def _read(load: ReadLoad, ready: Callable[[], None]) -> ReadResult:
    connection = await nats.connect(f"nats://{load.endpoint}",
                                    pending_size=64 * 1024 * 1024)
    histogram = new_histogram()
    events = 0
    payload_bytes = 0
    first_at = last_at = 0.0
    arrived = asyncio.Event()
    finished = asyncio.Event()
    clock = time.monotonic

    async def on_message(message: Msg) -> None:
        nonlocal events, payload_bytes, first_at, last_at
        data = message.data
        events += 1
        payload_bytes += len(data)
        if events % SAMPLE_EVERY == 0 and len(data) >= TIMESTAMP_BYTES:
            record_us(histogram, wall_us() - int.from_bytes(data[:TIMESTAMP_BYTES], "big"),
                      SAMPLE_EVERY)
        last_at = clock()
        if events == 1:
            first_at = last_at
        if events % 1024 == 0 or events == load.max_events:
            arrived.set()
            if events == load.max_events:
                finished.set()

    policy = DeliverPolicy.ALL if load.start == "earliest" else DeliverPolicy.NEW
    subscription = await connection.jetstream().subscribe(
        subject(load.stream), cb=on_message, ordered_consumer=True, manual_ack=True,
        deliver_policy=policy, pending_msgs_limit=1_000_000,
        pending_bytes_limit=256 * 1024 * 1024)
    ready()
    wait_s = load.first_s
    while not finished.is_set():
        seen = events
        arrived.clear()
        try:
            await asyncio.wait_for(arrived.wait(), wait_s)
        except TimeoutError:
            if events == seen:
                break  # idle: the stream has no more
        if events:
            wait_s = load.idle_s
    await subscription.unsubscribe()
    await connection.close()
    return ReadResult(events, payload_bytes, max(last_at - first_at, 0.0),
                      histogram.encode())


def read(load: ReadLoad, ready: Callable[[], None]) -> ReadResult:
    """One JetStream reader (a ``bench._peer_common.Job`` function)."""
    return asyncio.run(_read(load, ready))
