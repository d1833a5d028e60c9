"""The load loop of ``folio perf produce``: one writer, in this process or a spawned one.

The loop must cost almost nothing per event, since one writer process is
expected to reach 150,000 100-byte events/s. So payloads are built once per
group, not per event, and latency is measured per *group* of ``group_size``
consecutive events: the loop notes the time before the group's first
``write_event`` and attaches one done-callback to the group's last future
(futures of one writer complete in order); the callback records the elapsed
time ``group_size`` times in the histogram. Each event's latency is therefore
measured from its group's first send: pessimistic by at most the time it takes
to call ``write_event`` ``group_size`` times (a few tens of microseconds).

When the payload is at least 8 bytes long its first 8 bytes carry the group's
send time, microseconds since the epoch as a big-endian unsigned integer, so
that ``folio perf consume`` can report end-to-end latency.

**Transactions** (``txn_events`` K > 0): the same events go out as
single-routing-key transactions of K events each (PDP-44) instead of plain
writes, through ``TXN_KEYS`` transaction writers, each with its own routing
key; consecutive transactions rotate over them, so the key changes from one
transaction to the next. Each commit is ``commit_async`` (it returns at once),
and up to ``txn_in_flight`` commits are outstanding at a time (spread over
the keys); the loop waits for a key's oldest commit before it gives that key
another. A transaction writer has one block sequence on the wire at a time
and sends the commits queued behind it together as one entry (whole
transactions each, ``folio.txn._txn_flow``), so small transactions cost the
broker about what plain batches do. The event group is the transaction: its
latency runs from just before its ``begin`` (its first event) to the
acknowledgement of its commit, counted once per event.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import os
import signal
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import folio
from folio.cli._perf_stats import new_histogram, record_us
from folio.errors import FolioError

if TYPE_CHECKING:
    import multiprocessing.queues
    import multiprocessing.synchronize

__all__ = ["DEFAULT_TXN_IN_FLIGHT", "GROUP_SIZE", "ProduceConfig", "ProduceResult",
           "run_produce", "worker_main"]

#: Events per latency measurement (see the module docstring).
GROUP_SIZE = 16
#: Transaction writers (and routing keys) per perf writer in transaction mode.
TXN_KEYS = 8
#: Commits outstanding per perf writer in transaction mode, by default.
DEFAULT_TXN_IN_FLIGHT = 128
#: How long the loop waits for one commit before it gives up on the run.
_COMMIT_WAIT_S = 120.0
#: Bytes of the send timestamp at the head of each payload.
TIMESTAMP_BYTES = 8
#: How long to wait for the last done-callbacks once ``flush`` returned.
_CALLBACK_WAIT_S = 30.0
#: How long a spawned worker waits for the signal to start.
_GO_TIMEOUT_S = 120.0


@dataclasses.dataclass(frozen=True)
class ProduceConfig:
    """What one writer does (picklable: it is sent to spawned workers)."""

    endpoint: str
    topic: str
    event_bytes: int
    rate: float  # events/s of this writer; 0 for as fast as possible
    duration_s: float
    linger_ms: float | None = None
    batch_size_bytes: int | None = None
    max_in_flight: int | None = None
    txn_events: int = 0  # > 0: events per single-routing-key transaction
    txn_in_flight: int = DEFAULT_TXN_IN_FLIGHT
    #: The client settings (TLS, token...) workers connect with; None: the endpoint alone.
    client: folio.ClientConfig | None = None

    @property
    def group_size(self) -> int:
        """Events per latency measurement; smaller at low rates so pacing stays smooth.

        In transaction mode, the transaction's events.
        """
        if self.txn_events > 0:
            return self.txn_events
        if self.rate <= 0:
            return GROUP_SIZE
        return max(1, min(GROUP_SIZE, int(self.rate // 100)))


@dataclasses.dataclass(frozen=True)
class ProduceResult:
    """What one writer achieved.

    Attributes:
        events: events acknowledged.
        sent: events handed to ``write_event``.
        duration_s: from the first write to the end of the final flush.
        histogram: the publish latencies, ``HdrHistogram.encode()``d.
        error: the first failure's message, if any.
    """

    events: int
    sent: int
    duration_s: float
    histogram: bytes
    error: str | None = None

    @property
    def errors(self) -> int:
        """Events sent but not acknowledged."""
        return self.sent - self.events


class _Outcome(Protocol):
    """A write future or a commit's future: all ``_Groups.done`` asks of it."""

    def exception(self, timeout: float | None = None) -> BaseException | None: ...


class _Groups:
    """Done-callbacks of the groups: latencies, acknowledged count, completion."""

    def __init__(self, group_size: int) -> None:
        self.group_size = group_size
        self.histogram = new_histogram()
        self.acknowledged = 0
        self.completed = 0
        self.first_error: BaseException | None = None
        self._condition = threading.Condition()
        self._clock = time.perf_counter_ns

    def done(self, first_send_ns: int, future: _Outcome) -> None:
        """A group's last future completed (runs in the SDK's IO thread)."""
        latency_us = (self._clock() - first_send_ns) // 1000
        error = future.exception()
        with self._condition:
            if error is None:
                record_us(self.histogram, latency_us, self.group_size)
                self.acknowledged += self.group_size
            elif self.first_error is None:
                self.first_error = error
            self.completed += 1
            self._condition.notify_all()

    def wait(self, groups: int, timeout_s: float) -> bool:
        """Wait until ``groups`` groups completed."""
        with self._condition:
            return self._condition.wait_for(lambda: self.completed >= groups, timeout_s)


def run_produce(client: folio.Client, config: ProduceConfig,
                tick: Callable[[int], bool] | None = None,
                ready: Callable[[], None] | None = None) -> ProduceResult:
    """Write ``config.duration_s`` of load through one writer and measure it.

    Args:
        client: the client to write with.
        config: the load.
        tick: called about once a second with the events sent so far; when it
            returns True the load stops early.
        ready: called once the writer exists, just before the load starts
            (a spawned worker waits there for the others).
    """
    if config.txn_events > 0:
        return _run_txn_produce(client, config, tick, ready)
    options: dict[str, Any] = {
        name: value for name, value in (("linger_ms", config.linger_ms),
                                        ("batch_size_bytes", config.batch_size_bytes),
                                        ("max_in_flight", config.max_in_flight))
        if value is not None
    }
    writer = client.writer(config.topic, **options)
    if ready is not None:
        ready()
    k = config.group_size
    groups = _Groups(k)
    stamped = config.event_bytes >= TIMESTAMP_BYTES
    filler = os.urandom(config.event_bytes - TIMESTAMP_BYTES if stamped else config.event_bytes)
    interval_ns = int(k * 1e9 / config.rate) if config.rate > 0 else 0
    write = writer.write_event
    on_done = groups.done
    clock = time.perf_counter_ns
    wall_clock = time.time_ns
    partial = functools.partial
    repeat = range(k - 1)

    sent = 0
    group_count = 0
    failure: BaseException | None = None
    start_ns = clock()
    end_ns = start_ns + int(config.duration_s * 1e9)
    next_tick_ns = start_ns + 1_000_000_000
    next_send_ns = start_ns
    try:
        while True:
            first_ns = clock()
            if first_ns >= end_ns:
                break
            if first_ns >= next_tick_ns:
                next_tick_ns += 1_000_000_000
                if tick is not None and tick(sent):
                    break
            payload = ((wall_clock() // 1000).to_bytes(TIMESTAMP_BYTES, "big") + filler
                       if stamped else filler)
            for _ in repeat:
                write(payload)
            write(payload).add_done_callback(partial(on_done, first_ns))
            sent += k
            group_count += 1
            if interval_ns:
                next_send_ns += interval_ns
                delay_ns = next_send_ns - clock()
                if delay_ns > 0:
                    time.sleep(delay_ns / 1e9)
    except FolioError as error:
        # write_event refused: the writer failed or the event is invalid. The
        # unfinished group is not counted at all (neither sent nor acknowledged).
        failure = error
    try:
        writer.flush()
    except FolioError as error:
        failure = failure or error
    end_ns = clock()
    # flush returns once every future is done, but a future's callbacks may
    # still be running in the IO thread: wait for the last group's.
    groups.wait(group_count, _CALLBACK_WAIT_S)
    try:
        writer.close()
    except FolioError as error:
        failure = failure or error
    failure = failure or groups.first_error
    return ProduceResult(
        events=groups.acknowledged,
        sent=sent,
        duration_s=(end_ns - start_ns) / 1e9,
        histogram=groups.histogram.encode(),
        error=None if failure is None else (str(failure) or type(failure).__name__),
    )


def _run_txn_produce(client: folio.Client, config: ProduceConfig,
                     tick: Callable[[int], bool] | None,
                     ready: Callable[[], None] | None) -> ProduceResult:
    """``run_produce`` in transaction mode (see the module docstring)."""
    lanes = max(1, min(TXN_KEYS, config.txn_in_flight))
    depth = -(-config.txn_in_flight // lanes)  # commits outstanding per key
    prefix = f"perf-{os.getpid()}-{time.monotonic_ns() % 1_000_000}"
    writers = [client.single_routing_key_txn_writer(config.topic, f"{prefix}-{lane}")
               for lane in range(lanes)]
    outstanding: list[deque[concurrent.futures.Future[folio.TransactionResult]]] = [
        deque() for _ in range(lanes)]
    if ready is not None:
        ready()
    k = config.txn_events
    groups = _Groups(k)
    stamped = config.event_bytes >= TIMESTAMP_BYTES
    filler = os.urandom(config.event_bytes - TIMESTAMP_BYTES if stamped else config.event_bytes)
    interval_ns = int(k * 1e9 / config.rate) if config.rate > 0 else 0
    on_done = groups.done
    clock = time.perf_counter_ns
    wall_clock = time.time_ns
    partial = functools.partial
    repeat = range(k)

    sent = 0
    group_count = 0
    failure: BaseException | None = None
    start_ns = clock()
    end_ns = start_ns + int(config.duration_s * 1e9)
    next_tick_ns = start_ns + 1_000_000_000
    next_send_ns = start_ns
    try:
        while True:
            first_ns = clock()
            if first_ns >= end_ns:
                break
            if first_ns >= next_tick_ns:
                next_tick_ns += 1_000_000_000
                if tick is not None and tick(sent):
                    break
            lane = group_count % lanes
            waiting = outstanding[lane]
            if len(waiting) >= depth:
                # Wait for this key's oldest commit (its outcome is counted by
                # the callback).
                concurrent.futures.wait([waiting.popleft()], _COMMIT_WAIT_S)
                first_ns = clock()
            payload = ((wall_clock() // 1000).to_bytes(TIMESTAMP_BYTES, "big") + filler
                       if stamped else filler)
            txn = writers[lane].begin()
            write = txn.write_event
            for _ in repeat:
                write(payload)
            future = txn.commit_async()
            future.add_done_callback(partial(on_done, first_ns))
            waiting.append(future)
            sent += k
            group_count += 1
            if interval_ns:
                next_send_ns += interval_ns
                delay_ns = next_send_ns - clock()
                if delay_ns > 0:
                    time.sleep(delay_ns / 1e9)
    except FolioError as error:
        failure = error
    for writer in writers:
        try:
            writer.flush(_COMMIT_WAIT_S)
        except FolioError as error:
            failure = failure or error
    end_ns = clock()
    groups.wait(group_count, _CALLBACK_WAIT_S)
    for writer in writers:
        try:
            writer.close()
        except FolioError as error:
            failure = failure or error
    failure = failure or groups.first_error
    return ProduceResult(
        events=groups.acknowledged,
        sent=sent,
        duration_s=(end_ns - start_ns) / 1e9,
        histogram=groups.histogram.encode(),
        error=None if failure is None else (str(failure) or type(failure).__name__),
    )


def worker_main(config: ProduceConfig, index: int, queue: multiprocessing.queues.Queue[Any],
                go: multiprocessing.synchronize.Event,
                stop: multiprocessing.synchronize.Event) -> None:
    """A spawned writer process: report ready, wait for ``go``, load, report the result.

    Messages put on ``queue``: ``("ready", index)``, ``("progress", index,
    sent)`` about once a second, then ``("result", index, ProduceResult)`` or
    ``("failed", index, message)``. Ctrl-C is left to the parent, which sets
    ``stop``.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def ready() -> None:
        queue.put(("ready", index))
        if not go.wait(_GO_TIMEOUT_S):
            raise TimeoutError("the other writers did not start")

    def tick(sent: int) -> bool:
        queue.put(("progress", index, sent))
        return stop.is_set()

    try:
        made = (folio.Client(config=config.client) if config.client is not None
                else folio.Client(config.endpoint))
        with made as client:
            result = run_produce(client, config, tick, ready)
        queue.put(("result", index, result))
    except (FolioError, TimeoutError) as error:
        queue.put(("failed", index, str(error) or type(error).__name__))
