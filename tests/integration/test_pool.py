"""The client's connection pool (PDP-36) against a real ``folio standalone`` process.

Every client here reaches the server through a real TCP proxy
(``tests/support/proxy.py``), so its TCP connections are counted twice,
independently: the proxy's ``accepted``/``live_connections``, and the
ESTABLISHED sockets on the server's port in ``/proc/net/tcp`` (sampled all
along by a background thread; a socket counts as open together with others
only when two reads in a row list it, as one read is no snapshot).

- 1,000 writers on a topic of 100 segments, through one client, use at most
  ``max_connections_per_endpoint`` (2) connections, and every write's future
  names exactly where its own event (payload, writer, key) is stored: no
  reply reaches the wrong writer. The reader reading it all back shares the
  same connections.
- With 1 and 3 channels, flows spread least-busy (30 writers: 10 per channel).
- Closing a writer ends its flows, not its channel.
- A proxy cut breaks every channel: each is replaced (a new TCP connection),
  its flows set up again, and every event is stored exactly once, in order.

Every wait has a deadline.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import folio
from tests.support.bookies import BookieProcess
from tests.support.proxy import TcpProxy
from tests.support.wait import wait_for

#: Deadline of flushes, reads and waits for a condition.
DEADLINE_S = 30.0
_ESTABLISHED = "01"






#: A server-side socket as ``/proc/net/tcp`` lists it: (local address, remote
#: address, inode). The inode tells a new connection on the same 4-tuple from the old one;
#: it is 0 until the server accepts the socket (which then counts from the next two reads).
Socket = tuple[str, str, str]


def established_on(port: int) -> frozenset[Socket]:
    """ESTABLISHED TCP sockets whose local port is ``port`` (the server's side of each).

    One read of the table is no snapshot. The kernel hands ``/proc/net/tcp``
    out one page (about 27 sockets) per ``read`` call and, for the next page,
    walks its hash table again from where it stopped; the test process's
    threads share the GIL, so on a busy host its pages are read tens of ms
    apart. Sockets that come and go meanwhile can be listed twice (hence a
    set), missed, or listed together although they were never open at the
    same time: ``ConnectionSampler`` counts only what two reads in a row list.
    """
    found: set[Socket] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except FileNotFoundError:
            continue
        for line in lines:
            fields = line.split()
            local_port = int(fields[1].rsplit(":", 1)[1], 16)
            if local_port == port and fields[3] == _ESTABLISHED:
                found.add((fields[1], fields[2], fields[9]))
    return frozenset(found)


class ConnectionSampler:
    """Reads ``read(port)`` every 20 ms on a thread; ``peak`` is the most sockets open together.

    Open together means listed by two reads in a row. A socket that one read
    lists was open at some moment of that read, which is all a torn read
    promises: one that began before a proxy cut and ended after the client
    reconnected listed both cut connections and a new one, 3, although the
    server never held more than 2 at once (the proxy had reset the old ones
    before it accepted the new one). A socket (same addresses, same inode)
    listed by two reads in a row was open from the end of the first to the
    start of the second, so all those the two reads share were open together
    at that moment: ``peak`` never exceeds what the server really held. A
    connection that lives less than about one period (20 ms plus a read) can
    be missed; through the proxy, ``TcpProxy.accepted`` counts every one.

    ``read`` is the table's reader (``established_on``; a test gives a scripted one).
    """

    def __init__(self, port: int,
                 read: Callable[[int], frozenset[Socket]] = established_on) -> None:
        self._port = port
        self._read = read
        self._last = read(port)
        self.peak = 0
        self.samples = 1
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tcp-sampler", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            self._sample()

    def _sample(self) -> None:
        listed = self._read(self._port)
        self.peak = max(self.peak, len(listed & self._last))
        self._last = listed
        self.samples += 1

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(5)
        self._sample()
        return self.peak


def read_exactly(client: folio.Client, topic: str, count: int) -> list[folio.Event[bytes]]:
    """Every event of ``topic``, which must hold exactly ``count``."""
    ends = {s.name: s.end_offset for s in client.get_segments(topic)}
    assert sum(ends.values()) == count, f"the segments hold {sum(ends.values())}, not {count}"
    events: list[folio.Event[bytes]] = []
    deadline = time.monotonic() + DEADLINE_S
    with client.reader(topic) as reader:
        while len(events) < count:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"read {len(events)} of {count} events in {DEADLINE_S} s"
            event = reader.read_next(timeout=remaining)
            if event is not None:
                events.append(event)
        stats = client.pool_stats()
        assert sum(c.read_flows for c in stats.connections) == len(ends)
    return events


def payload(writer: int, index: int) -> bytes:
    return f"w{writer:04d}|e{index:03d}".encode()


def _scripted(reads: list[frozenset[Socket]], done: threading.Event,
              ) -> Callable[[int], frozenset[Socket]]:
    """A table reader returning ``reads`` in turn, then the last one again (setting ``done``)."""
    left = list(reads)

    def read(_port: int) -> frozenset[Socket]:
        if len(left) > 1:
            return left.pop(0)
        done.set()
        return left[0]

    return read


def test_the_sampler_counts_only_sockets_open_together() -> None:
    # Server-side sockets (local, remote, inode): a and b are cut by the proxy,
    # c and d are their replacements (the same 4-tuple again would be a new inode).
    a, b = ("0:1F90", "0:A000", "11"), ("0:1F90", "0:A002", "12")
    c, d = ("0:1F90", "0:A004", "13"), ("0:1F90", "0:A006", "14")
    torn = [frozenset({a, b}),
            frozenset({a, b, c}),  # its first pages read before the cut, the last after
            frozenset({c, d})]
    real = [frozenset({a, b}), frozenset({a, b, c}), frozenset({a, b, c})]
    peaks = []
    for reads in (torn, real):
        done = threading.Event()
        sampler = ConnectionSampler(8080, _scripted(reads, done))
        wait_for(done.is_set, "every scripted read taken")
        peaks.append(sampler.stop())
    assert peaks == [2, 3], "a torn read is not 3 at once; 3 in two reads in a row are"


def test_a_thousand_writers_share_two_connections_and_replies_reach_their_writer(
        server: BookieProcess, proxy: TcpProxy, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="folio")
    writers, per_writer, segments = 1000, 3, 100
    wait_for(lambda: not established_on(server.port), "earlier tests' connections gone")
    sampler = ConnectionSampler(server.port)
    try:
        with folio.Client(proxy.address, timeout_s=30) as client:
            assert client.max_connections_per_endpoint == 2
            client.create_topic("pool-1k", segments)
            made = [client.writer("pool-1k", linger_ms=2.0) for _ in range(writers)]
            written: dict[bytes, tuple[int, str, folio.WriteFuture]] = {}
            for w, writer in enumerate(made):
                for index in range(per_writer):
                    key = f"w{w}-k{index}"
                    data = payload(w, index)
                    written[data] = (w, key, writer.write_event(data, key))
            for writer in made:
                writer.flush(timeout=DEADLINE_S)
            stats = client.pool_stats()
            assert stats.max_connections == 2
            assert stats.open_connections == 2
            flows = [c.flows for c in stats.connections]
            assert sum(flows) >= writers  # a flow per (writer, segment) used
            assert max(flows) - min(flows) <= 1, flows
            assert all(c.state == "ready" and c.stream_connected for c in stats.connections)
            broke = [r.getMessage() for r in caplog.records if "append stream" in r.getMessage()]
            assert all(c.stream_restarts == 0 for c in stats.connections), (
                stats.connections, broke, server.log()[-3000:])

            events = read_exactly(client, "pool-1k", writers * per_writer)
            assert proxy.live_connections() == 2
            for writer in made:
                writer.close(timeout=DEADLINE_S)
            wait_for(lambda: client.pool_stats().flows == 0, "every flow ended")
            assert client.pool_stats().open_connections == 2
    finally:
        peak = sampler.stop()
    assert proxy.accepted == 2, "the client opened more connections than its pool allows"
    assert 1 <= peak <= 2, f"{peak} connections at the server ({sampler.samples} samples)"
    assert len(events) == len(written)
    for event in events:
        w, key, future = written[event.payload]
        result = future.result(timeout=0)
        assert (result.segment, result.offset) == (event.segment, event.offset), \
            f"writer {w}'s event {event.payload!r} is at {event.segment}@{event.offset}, " \
            f"its future says {result.segment}@{result.offset}"
        assert event.routing_key == key


@pytest.mark.parametrize("channels", [1, 3])
def test_flows_spread_least_busy_over_the_allowed_channels(
        server: BookieProcess, proxy: TcpProxy, channels: int) -> None:
    topic = f"pool-spread-{channels}"
    writers = 30
    with folio.Client(proxy.address, timeout_s=30,
                      max_connections_per_endpoint=channels) as client:
        client.create_topic(topic, 10)
        made = [client.writer(topic) for _ in range(writers)]
        futures = [(w, writer.write_event(payload(w, 0), f"key-{w}"))
                   for w, writer in enumerate(made)]
        for writer in made:
            writer.flush(timeout=DEADLINE_S)
        stats = client.pool_stats()
        flows = [c.flows for c in stats.connections]
        assert stats.open_connections == channels
        assert sum(flows) == writers  # one key each: one flow each
        assert max(flows) - min(flows) <= 1, flows
        assert proxy.live_connections() == channels
        events = read_exactly(client, topic, writers)
        by_payload = {event.payload: event for event in events}
        for w, future in futures:
            result = future.result(timeout=0)
            event = by_payload[payload(w, 0)]
            assert (result.segment, result.offset) == (event.segment, event.offset)
        for writer in made:
            writer.close(timeout=DEADLINE_S)
    assert proxy.accepted == channels


def test_closing_a_writer_ends_its_flows_not_the_channel(
        server: BookieProcess, proxy: TcpProxy) -> None:
    with folio.Client(proxy.address, timeout_s=30) as client:
        client.create_topic("pool-close", 4)
        first, second = client.writer("pool-close"), client.writer("pool-close")
        futures = [(writer.write_event(b"%d" % n, f"key-{n}"))
                   for n in range(8) for writer in (first, second)]
        first.flush(timeout=DEADLINE_S)
        second.flush(timeout=DEADLINE_S)
        used = len({future.result(timeout=0).segment for future in futures})  # by each
        before = client.pool_stats()
        assert before.flows == 2 * used and before.open_connections == 2
        live = proxy.live_connections()

        first.close(timeout=DEADLINE_S)
        wait_for(lambda: client.pool_stats().flows == used, "the closed writer's flows ended")
        after = client.pool_stats()
        assert after.open_connections == 2
        assert all(c.state == "ready" and c.stream_connected for c in after.connections)
        assert proxy.live_connections() == live and proxy.accepted == live

        # The channels still carry the other writer, with nothing set up again.
        assert second.write_event(b"b-late", "key-0").result(timeout=DEADLINE_S).offset >= 0
        assert all(c.stream_restarts == 0 for c in client.pool_stats().connections)
        second.close(timeout=DEADLINE_S)
        wait_for(lambda: client.pool_stats().flows == 0, "every flow ended")
        assert client.pool_stats().open_connections == 2
    assert proxy.accepted == live


@pytest.mark.faults
def test_a_cut_channel_is_replaced_and_its_flows_set_up_again(
        server: BookieProcess, proxy: TcpProxy) -> None:
    writers, per_writer, segments = 20, 300, 10
    total = writers * per_writer
    done = threading.Semaphore(0)
    wait_for(lambda: not established_on(server.port), "earlier tests' connections gone")
    sampler = ConnectionSampler(server.port)
    with folio.Client(proxy.address, timeout_s=30) as client:
        client.create_topic("pool-cut", segments)
        made = [client.writer("pool-cut", batch_size_bytes=1024, max_in_flight=2)
                for _ in range(writers)]
        written: list[tuple[int, int, str, folio.WriteFuture]] = []
        cuts: list[int] = []
        acked = 0
        for index in range(per_writer):
            for w, writer in enumerate(made):
                key = f"w{w}-k{index % 3}"
                future = writer.write_event(payload(w, index), key)
                future.add_done_callback(lambda _f: done.release())
                written.append((w, index, key, future))
            if index in (per_writer // 3, 2 * per_writer // 3):
                # Cut after a third and two thirds, once half of what was written
                # is acknowledged (the channels are up): the rest is on its way.
                deadline = time.monotonic() + DEADLINE_S
                while acked < len(written) // 2:
                    assert done.acquire(timeout=max(0.0, deadline - time.monotonic())), \
                        f"only {acked} of {len(written)} writes acknowledged"
                    acked += 1
                cuts.append(proxy.cut())
        for writer in made:
            writer.flush(timeout=DEADLINE_S)
        assert len(cuts) == 2 and all(count == 2 for count in cuts), cuts
        stats = client.pool_stats()
        assert stats.open_connections == 2
        assert all(c.stream_restarts >= 1 for c in stats.connections), stats
        wait_for(lambda: all(c.state == "ready" and c.stream_connected
                             for c in client.pool_stats().connections), "channels ready")
        assert proxy.live_connections() == 2
        failed = [(w, i, f.exception(timeout=0)) for w, i, _, f in written
                  if f.exception(timeout=0) is not None]
        assert not failed, failed[:5]
        events = read_exactly(client, "pool-cut", total)
        for writer in made:
            writer.close(timeout=DEADLINE_S)
    assert sampler.stop() <= 2, "more connections at the server than the pool allows"
    # Two channels, each replaced after each cut (the admin channel's first
    # connection counts once): never more than two at a time.
    assert proxy.accepted == 2 * (1 + len(cuts))
    stored = [event.payload for event in events]
    assert sorted(stored) == sorted(payload(w, i) for w, i, _, _ in written), \
        "events lost or duplicated"
    futures = {payload(w, i): f for w, i, _, f in written}
    by_key: dict[str | None, list[bytes]] = {}
    for event in events:
        result = futures[event.payload].result(timeout=0)
        assert result.segment == event.segment
        assert result.offset in (-1, event.offset)  # -1: acknowledged as a duplicate
        by_key.setdefault(event.routing_key, []).append(event.payload)
    for routing_key, payloads in by_key.items():
        assert payloads == [payload(w, i) for w, i, k, _ in written if k == routing_key]


def test_pool_option_is_checked(server: BookieProcess) -> None:
    with pytest.raises(folio.InvalidArgumentError):
        folio.Client(server.address, max_connections_per_endpoint=0)
    with folio.Client(server.address) as client:
        stats = client.pool_stats()
        assert isinstance(stats, folio.PoolStats)
        assert (stats.endpoint, stats.max_connections) == (server.address, 2)
        assert stats.open_connections == 1 and stats.flows == 0  # the admin channel only
        assert isinstance(stats.connections[0], folio.ConnectionStats)
    assert client.pool_stats().connections == ()
