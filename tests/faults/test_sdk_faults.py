"""The SDK across broken connections and a broker crash, against a real ``folio standalone``.

- A writer writing continuously through a TCP proxy (``tests/support/proxy.py``)
  whose connections are reset three times, at points set by how many events
  were acknowledged so far: every write succeeds and the topic holds every
  event exactly once, each routing key's events in write order.
- A writer writing while the broker is SIGKILLed and restarted on the same
  data dir and port: the writer reconnects by itself, every write succeeds,
  and every event is stored exactly once, in order per key.
- A reader reading through the proxy while its connections are reset (both
  while catching up and at the tail, as more is written): it delivers every
  event exactly once, in offset order per segment.

Cuts and the kill are triggered by progress (acknowledged or read events),
never by timers; every wait has a deadline.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable

import pytest

import folio
from tests.support.bookies import BookieProcess, BookieProcesses
from tests.support.catch_up import read_to_sentinels
from tests.support.proxy import TcpProxy

pytestmark = pytest.mark.faults

SEGMENTS = 3
KEYS = [f"key-{n}" for n in range(30)]
#: Deadline of a flush, and of reading everything back.
FLUSH_TIMEOUT_S = 60.0
READ_TIMEOUT_S = 60.0


def _payload(index: int, key: str, size: int = 100) -> bytes:
    """Event ``index`` of ``key``, padded to ``size`` bytes."""
    return f"{index:07d}|{key}|".encode().ljust(size, b".")


def _index(payload: bytes) -> int:
    return int(payload[:7])


class _Acks:
    """Counts acknowledged (and failed) writes; ``reached(n)`` is set once ``n`` are done."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.done = 0
        self._waiters: list[tuple[int, threading.Event]] = []

    def callback(self, _future: folio.WriteFuture) -> None:
        with self._lock:
            self.done += 1
            for count, event in self._waiters:
                if self.done >= count:
                    event.set()

    def reached(self, count: int) -> threading.Event:
        event = threading.Event()
        with self._lock:
            self._waiters.append((count, event))
            if self.done >= count:
                event.set()
        return event


_Written = list[tuple[str, int, folio.WriteFuture]]


def _write(writer: folio.EventWriter[bytes], count: int, acks: _Acks,
           on_progress: Callable[[], None] = lambda: None) -> _Written:
    """Writes ``count`` keyed events of ~100 bytes; ``on_progress`` runs after each."""
    written: _Written = []
    for index in range(count):
        key = KEYS[index % len(KEYS)]
        future = writer.write_event(_payload(index, key), key)
        future.add_done_callback(acks.callback)
        written.append((key, index, future))
        on_progress()
    return written


def _read_exactly(client: folio.Client, topic: str, count: int) -> list[folio.Event[bytes]]:
    """Every event of ``topic``, which must hold exactly ``count`` (fails otherwise)."""
    ends = {s.name: s.end_offset for s in client.get_segments(topic)}
    assert sum(ends.values()) == count, f"the segments hold {ends}, not {count} events"
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


def _check_exactly_once_in_order(written: _Written, events: list[folio.Event[bytes]]) -> None:
    """Every written event read once; each segment contiguous; each key in write order."""
    results = {index: future.result(timeout=0) for _, index, future in written}
    indexes = sorted(_index(event.payload) for event in events)
    assert indexes == list(range(len(written))), "events lost or duplicated"
    by_segment: dict[str, list[int]] = defaultdict(list)
    by_key: dict[str, list[int]] = defaultdict(list)
    for event in events:
        by_segment[event.segment].append(event.offset)
        assert event.routing_key is not None
        by_key[event.routing_key].append(_index(event.payload))
        key = KEYS[_index(event.payload) % len(KEYS)]
        assert event.routing_key == key
        assert event.payload == _payload(_index(event.payload), key)
        result = results[_index(event.payload)]
        assert result.segment == event.segment
        assert result.offset in (-1, event.offset)  # -1: acknowledged as a duplicate
    assert len(by_segment) == SEGMENTS
    for offsets in by_segment.values():
        assert offsets == list(range(len(offsets)))
    for key, key_indexes in by_key.items():
        assert key_indexes == [i for k, i, _ in written if k == key]






def test_writer_survives_connection_cuts(server: BookieProcess, proxy: TcpProxy) -> None:
    events = 20_000
    cut_after = [4_000, 9_000, 14_000]  # acknowledged events
    with folio.Client(proxy.address, timeout_s=30) as client:
        client.create_topic("cuts", SEGMENTS)
        acks = _Acks()
        cuts = [acks.reached(n) for n in cut_after]
        cut_connections: list[int] = []

        def cut_when_due() -> None:
            if cuts and cuts[0].is_set():
                cuts.pop(0)
                cut_connections.append(proxy.cut())

        # Small blocks and few in flight: acknowledgements pace the writes,
        # so every cut lands while blocks are on their way.
        with client.writer("cuts", batch_size_bytes=4096, max_in_flight=4) as writer:
            written = _write(writer, events, acks, cut_when_due)
            writer.flush(timeout=FLUSH_TIMEOUT_S)
        assert not cuts, f"only {len(cut_connections)} of {len(cut_after)} cuts happened"
        assert all(count >= 1 for count in cut_connections), cut_connections
        assert proxy.accepted >= 1 + len(cut_after)  # the client came back after each cut
        failed = [(i, f.exception(timeout=0)) for _, i, f in written if f.exception(timeout=0)]
        assert not failed, failed[:5]
        _check_exactly_once_in_order(written, _read_exactly(client, "cuts", events))


def test_writer_survives_broker_kill_and_restart_on_the_same_port(
    bookie_processes: BookieProcesses, server: BookieProcess
) -> None:
    events = 20_000
    kill_after = 6_000  # acknowledged events
    port = server.port
    acks = _Acks()
    due = acks.reached(kill_after)
    restarted: list[BookieProcess] = []
    killed_at: list[int] = []  # acknowledged events when the kill came
    failures: list[BaseException] = []

    def crash_and_restart() -> None:
        try:
            assert due.wait(60), "the writer never got far enough for the kill"
            killed_at.append(acks.done)
            assert server.kill() == -9
            argv = ["standalone", "--data-dir", str(server.data_dir), "--port", str(port),
                    "--metrics-port", "0"]
            restarted.append(bookie_processes.start_folio(argv, server.data_dir))
        except BaseException as error:
            failures.append(error)  # asserted on the test's thread

    with folio.Client(server.address, timeout_s=30) as client:
        client.create_topic("crash", SEGMENTS)
        crasher = threading.Thread(target=crash_and_restart, name="crash-and-restart")
        crasher.start()
        try:
            with client.writer("crash", batch_size_bytes=4096, max_in_flight=4) as writer:
                written = _write(writer, events, acks)
                writer.flush(timeout=FLUSH_TIMEOUT_S)
        finally:
            due.set()  # lets the thread end if the writer failed early
            crasher.join(60)
        assert not crasher.is_alive()
        assert not failures, failures
        assert restarted[0].port == port
        assert killed_at[0] < events - 1_000  # the writer had much more to write
        failed = [(i, f.exception(timeout=0)) for _, i, f in written if f.exception(timeout=0)]
        assert not failed, failed[:5]
        _check_exactly_once_in_order(written, _read_exactly(client, "crash", events))
    assert restarted[0].terminate() == 0


def test_reader_survives_connection_cuts(server: BookieProcess, proxy: TcpProxy) -> None:
    before = 12_000  # events written before reading: ~4 MB per segment, many Read responses
    chunk, chunks = 1_000, 6  # then written while the reader waits at the tail
    total = before + chunk * chunks
    size = 1000
    cut_every = 2_500  # read events
    with folio.Client(server.address, timeout_s=30) as direct, \
            folio.Client(proxy.address, timeout_s=30) as through_proxy:
        direct.create_topic("reads", SEGMENTS)
        futures: list[tuple[bytes, folio.WriteFuture]] = []

        def write(writer: folio.EventWriter[bytes], first: int, count: int) -> None:
            for index in range(first, first + count):
                key = KEYS[index % len(KEYS)]
                payload = _payload(index, key, size)
                futures.append((payload, writer.write_event(payload, key)))
            writer.flush(timeout=FLUSH_TIMEOUT_S)

        with direct.writer("reads") as writer:
            write(writer, 0, before)
        # The reader sets caught_up[n] once it read n events: all written so far.
        caught_up = {before + k * chunk: threading.Event() for k in range(chunks)}
        writer_failures: list[BaseException] = []

        def write_at_the_tail() -> None:
            try:
                with direct.writer("reads") as writer:
                    for first, event in caught_up.items():
                        assert event.wait(READ_TIMEOUT_S), f"the reader never read {first}"
                        write(writer, first, chunk)
            except BaseException as error:
                writer_failures.append(error)  # asserted on the test's thread

        background = threading.Thread(target=write_at_the_tail, name="tail-writer")
        background.start()
        read: list[folio.Event[bytes]] = []
        cuts = due = 0
        reader = through_proxy.reader("reads")
        # Iteration blocks at the tail until close: a watchdog closes the
        # reader at the deadline, and the assertions below say what was missing.
        watchdog = threading.Timer(READ_TIMEOUT_S, reader.close)
        watchdog.start()
        try:
            for event in reader:
                read.append(event)
                count = len(read)
                if count in caught_up:
                    caught_up[count].set()
                if count % cut_every == 0:
                    due += 1
                # A cut finding no connection (the reader is between its
                # reconnects, reading what it buffered) is tried again.
                if due and proxy.cut():
                    due -= 1
                    cuts += 1
                if count == total:
                    break
        finally:
            watchdog.cancel()
            watchdog.join()
            for reached in caught_up.values():
                reached.set()  # lets the writer end if the reader failed early
            background.join(FLUSH_TIMEOUT_S)
        assert not background.is_alive()
        assert not writer_failures, writer_failures
        assert len(read) == total, f"read {len(read)} of {total} events"
        # Nothing more to come: not one event was delivered twice (a sentinel
        # per segment proves the reader read everything before it).
        assert read_to_sentinels(direct, "reads", reader, b"sentinel") == []
        reader.close()
        assert cuts == total // cut_every, f"{due} cuts not done"

        written: dict[tuple[str, int], bytes] = {}
        for payload, future in futures:
            result = future.result(timeout=0)
            written[result.segment, result.offset] = payload
        assert len(written) == total
        by_segment: dict[str, list[int]] = defaultdict(list)
        for event in read:
            by_segment[event.segment].append(event.offset)
            assert event.payload == written[event.segment, event.offset]
        assert len(by_segment) == SEGMENTS
        ends = {s.name: s.end_offset for s in direct.get_segments("reads")}
        for segment, offsets in by_segment.items():
            assert offsets == list(range(ends[segment] - 1))  # then its sentinel
