"""Redis Streams through ``redis-py`` for ``bench.peers``: a writer and a reader.

Writer: ``XADD`` commands sent ``pipeline`` at a time on one connection
(``pipeline(transaction=False)``, then ``execute``), the usual way to write
fast with redis-py; at a fixed rate, one small pipeline per paced group. With
``appendfsync always`` Redis replies once the AOF holding the commands is
fsynced, one fsync per event-loop iteration (so per pipeline, roughly).
Reader: ``XREAD COUNT 1000`` from the start (catch-up), or blocking from the
stream's last entry (end-to-end latency).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import redis

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

__all__ = ["connect", "produce", "read"]

#: Entries per XREAD.
READ_COUNT = 1000
FIELD = b"p"


def connect(endpoint: str) -> redis.Redis:
    """A redis-py client of ``host:port``."""
    host, port = endpoint.rsplit(":", 1)
    return redis.Redis(host=host, port=int(port), socket_timeout=120)


def produce(load: WriteLoad, ready: Callable[[], None]) -> ProduceResult:
    """One redis-py writer (a ``bench._peer_common.Job`` function)."""
    client = connect(load.endpoint)
    client.ping()
    pipe = client.pipeline(transaction=False)
    k = load.pipeline if load.rate <= 0 else group_size(load.rate)
    key = load.stream.encode()
    histogram = new_histogram()
    filler = filler_bytes(load.event_bytes)
    interval_ns = int(k * 1e9 / load.rate) if load.rate > 0 else 0
    clock = time.perf_counter_ns
    xadd = pipe.xadd
    acknowledged = 0
    failure: str | None = None
    ready()
    start_ns = clock()
    end_ns = start_ns + int(load.duration_s * 1e9)
    next_send_ns = start_ns
    try:
        while (first_ns := clock()) < end_ns:
            fields = {FIELD: stamped_payload(filler)}
            for _ in range(k):
                xadd(key, fields)  # type: ignore[arg-type]
            pipe.execute()
            record_us(histogram, (clock() - first_ns) // 1000, k)
            acknowledged += k
            if interval_ns:
                next_send_ns += interval_ns
                delay_ns = next_send_ns - clock()
                if delay_ns > 0:
                    time.sleep(delay_ns / 1e9)
    except redis.RedisError as error:
        failure = f"{type(error).__name__}: {error}"
    finish_ns = clock()
    client.close()
    return ProduceResult(acknowledged, acknowledged + (k if failure else 0),
                         (finish_ns - start_ns) / 1e9, histogram.encode(), failure)


def _last_id(client: redis.Redis, key: bytes) -> bytes:
    last: Any = client.xrevrange(key, count=1)
    return last[0][0] if last else b"0-0"


def read(load: ReadLoad, ready: Callable[[], None]) -> ReadResult:
    """One redis-py reader (a ``bench._peer_common.Job`` function)."""
    client = connect(load.endpoint)
    key = load.stream.encode()
    position = b"0-0" if load.start == "earliest" else _last_id(client, key)
    histogram = new_histogram()
    clock = time.monotonic
    events = 0
    payload_bytes = 0
    first_at = last_at = 0.0
    ready()
    block_ms = int(load.first_s * 1000)
    while load.max_events is None or events < load.max_events:
        reply: Any = client.xread({key: position}, count=READ_COUNT, block=block_ms)
        if not reply:
            break  # idle: nothing within block_ms
        entries = reply[0][1]
        now_us = wall_us()
        for _, fields in entries:
            data = fields[FIELD]
            events += 1
            payload_bytes += len(data)
            if events % SAMPLE_EVERY == 0 and len(data) >= TIMESTAMP_BYTES:
                record_us(histogram, now_us - int.from_bytes(data[:TIMESTAMP_BYTES], "big"),
                          SAMPLE_EVERY)
        position = entries[-1][0]
        last_at = clock()
        if not first_at:
            first_at = last_at
        block_ms = int(load.idle_s * 1000)
    client.close()
    return ReadResult(events, payload_bytes, max(last_at - first_at, 0.0), histogram.encode())
