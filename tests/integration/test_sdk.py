"""The Python SDK end to end against a real ``folio standalone`` process.

One server per module (started on free ports); each test uses topics of its
own. Covers the admin calls and their typed errors, writing with and without
routing keys and reading back (order per key, contiguous offsets, every
attribute intact), the start positions of readers, size limits and truncation.
"""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Any

import pytest

import folio
from folio.api.v1.routing import routing_point
from tests.support.bookies import BookieProcess
from tests.support.catch_up import read_to_sentinels


def _read_all(reader: folio.EventReader[Any], count: int,
              timeout_s: float = 30.0) -> list[folio.Event[Any]]:
    """Exactly ``count`` events (fails if they do not come in time)."""
    events: list[folio.Event[Any]] = []
    deadline = time.monotonic() + timeout_s
    while len(events) < count:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"only {len(events)} of {count} events within {timeout_s} s"
        event = reader.read_next(timeout=remaining)
        if event is not None:
            events.append(event)
    return events


# -- admin ---------------------------------------------------------------------


def test_topic_admin_round_trip(client: folio.Client) -> None:
    created = client.create_topic("admin-a", 3, retention_ms=60_000, max_event_bytes=2048)
    assert created.name == "admin-a"
    assert [s.name for s in created.segments] == ["admin-a/0", "admin-a/1", "admin-a/2"]
    assert created.segments[0].key_low == 0.0 and created.segments[-1].key_high == 1.0
    assert created.config.retention_ms == 60_000
    assert created.config.max_event_bytes == 2048
    assert created.created_ms > 0

    got = client.get_topic("admin-a")
    assert got == created
    assert "admin-a" in [t.name for t in client.list_topics()]

    updated = client.update_topic_config("admin-a", retention_bytes=1 << 30)
    assert updated.config.retention_bytes == 1 << 30
    assert updated.config.retention_ms == 60_000

    segments = client.get_segments("admin-a")
    assert segments == list(created.segments)
    info = client.get_segment_info("admin-a/1")
    assert info.segment.name == "admin-a/1"
    assert (info.segment.start_offset, info.segment.end_offset, info.sealed) == (0, 0, False)

    client.delete_topic("admin-a")
    assert "admin-a" not in [t.name for t in client.list_topics()]
    with pytest.raises(folio.TopicNotFoundError) as caught:
        client.get_topic("admin-a")
    assert caught.value.topic == "admin-a"


def test_admin_refusals_are_typed(client: folio.Client) -> None:
    client.create_topic("admin-b")
    with pytest.raises(folio.TopicExistsError):
        client.create_topic("admin-b")
    with pytest.raises(folio.InternalTopicError):
        client.create_topic("__folio_reserved")
    assert client.create_topic("_not_reserved").name == "_not_reserved"
    with pytest.raises(folio.TopicNameError):
        client.create_topic("bad name")
    with pytest.raises(folio.TopicNameError, match=r"topic name cannot be '\.\.'"):
        client.create_topic("..")
    with pytest.raises(folio.InvalidArgumentError):
        client.create_topic("admin-c", 5000)
    with pytest.raises(folio.InvalidArgumentError):
        client.update_topic_config("admin-b", no_such_field=1)
    with pytest.raises(folio.TopicNotFoundError):
        client.delete_topic("admin-missing")
    with pytest.raises(folio.TopicNotFoundError):
        client.update_topic_config("admin-missing", retention_ms=1000)
    with pytest.raises(folio.TopicNotFoundError):
        client.get_segments("admin-missing")
    with pytest.raises(folio.TopicNotFoundError):
        client.writer("admin-missing")
    with pytest.raises(folio.NotFoundError):
        client.get_segment_info("admin-b/7")
    with pytest.raises(folio.OffsetOutOfRangeError) as caught:
        client.truncate_segment("admin-b/0", 10)
    assert (caught.value.start_offset, caught.value.end_offset) == (0, 0)


# -- writing and reading ---------------------------------------------------------


def test_write_with_and_without_keys_then_read_back(client: folio.Client) -> None:
    client.create_topic("rw", 3)
    keys = [f"user-{n}" for n in range(20)]
    before_ms = int(time.time() * 1000)
    futures: list[tuple[str | None, int, folio.WriteFuture]] = []
    with client.writer("rw", folio.JsonSerializer(), linger_ms=2,
                       batch_size_bytes=4096) as writer:
        for i in range(2000):
            key = keys[(i // 4) % len(keys)] if i % 4 else None
            headers = {"n": str(i).encode()} if i % 7 == 0 else None
            futures.append((key, i, writer.write_event({"i": i, "key": key}, key, headers)))
        writer.flush(timeout=30)
    after_ms = int(time.time() * 1000)
    results = {i: future.result(timeout=0) for _, i, future in futures}
    assert all(result.offset >= 0 for result in results.values())

    reader = client.reader("rw", serializer=folio.JsonSerializer())
    events = _read_all(reader, 2000)
    assert read_to_sentinels(client, "rw", reader, {"sentinel": True},
                             folio.JsonSerializer()) == []  # nothing more, nothing twice
    reader.close()

    # Every event once, where the write future said it went, attributes intact.
    by_index = {event.payload["i"]: event for event in events}
    assert sorted(by_index) == list(range(2000))
    for i, event in by_index.items():
        assert (event.segment, event.offset) == (results[i].segment, results[i].offset)
        assert event.routing_key == event.payload["key"]
        assert event.timestamp is not None and before_ms <= event.timestamp <= after_ms
        assert event.headers == ({"n": str(i).encode()} if i % 7 == 0 else {})
    # Offsets of each segment contiguous from 0, and read in offset order.
    by_segment: dict[str, list[int]] = defaultdict(list)
    for event in events:
        by_segment[event.segment].append(event.offset)
    assert set(by_segment) <= {"rw/0", "rw/1", "rw/2"}
    for offsets in by_segment.values():
        assert offsets == list(range(len(offsets)))
    # Events of each key in one segment, in write order.
    by_key: dict[str, list[folio.Event[Any]]] = defaultdict(list)
    for event in events:
        if event.routing_key is not None:
            by_key[event.routing_key].append(event)
    assert set(by_key) == set(keys)
    for key_events in by_key.values():
        assert len({event.segment for event in key_events}) == 1
        indexes = [event.payload["i"] for event in key_events]
        assert indexes == sorted(indexes)
    # Routing follows the documented hash and the segments' key ranges.
    ranges = {s.name: s for s in client.get_segments("rw")}
    for key, key_events in by_key.items():
        segment = ranges[key_events[0].segment]
        assert segment.key_low <= routing_point(key) < segment.key_high


def test_string_serializer_and_bytes(client: folio.Client) -> None:
    client.create_topic("strings", 2)
    with client.writer("strings", folio.StringSerializer()) as writer:
        for text in ("héllo", "", "日本", "plain"):
            writer.write_event(text, routing_key="k")
    with client.reader("strings", serializer=folio.StringSerializer()) as reader:
        assert [e.payload for e in _read_all(reader, 4)] == ["héllo", "", "日本", "plain"]
    with client.reader("strings") as raw:
        assert [e.payload for e in _read_all(raw, 4)] == \
            [b"h\xc3\xa9llo", b"", "日本".encode(), b"plain"]


def test_latest_sees_only_new_events(client: folio.Client) -> None:
    client.create_topic("latest", 3)
    with client.writer("latest") as writer:
        for i in range(30):
            writer.write_event(b"old-%d" % i, routing_key=str(i))
        writer.flush(30)
        reader = client.reader("latest", "latest")
        assert reader.read_next(timeout=0.5) is None
        for i in range(30):
            writer.write_event(b"new-%d" % i, routing_key=str(i))
    new = _read_all(reader, 30)
    assert sorted(e.payload for e in new) == sorted(b"new-%d" % i for i in range(30))
    assert read_to_sentinels(client, "latest", reader, b"sentinel") == []
    reader.close()


def test_explicit_start_offsets_inside_a_block(client: folio.Client) -> None:
    client.create_topic("explicit", 1)
    with client.writer("explicit", linger_ms=1000) as writer:
        futures = [writer.write_event(b"e%d" % i) for i in range(10)]
        writer.flush(30)  # one block of ten events
    offsets = [f.result().offset for f in futures]
    assert offsets == list(range(10))
    with client.reader("explicit", {"explicit/0": 3}) as reader:
        events = _read_all(reader, 7)
        assert [e.offset for e in events] == list(range(3, 10))
        assert [e.payload for e in events] == [b"e%d" % i for i in range(3, 10)]
        with client.reader("explicit", {"explicit/0": 10}) as at_end:
            # One sentinel at offset 10: the first reader has nothing before
            # it, the one started at the end reads nothing but it.
            assert read_to_sentinels(client, "explicit", reader, b"sentinel") == []
            first = at_end.read_next(timeout=30)
            assert first is not None and (first.offset, first.payload) == (10, b"sentinel")
    with pytest.raises(folio.InvalidArgumentError):
        client.reader("explicit", {"other/0": 0})


def test_read_next_times_out_with_none(client: folio.Client) -> None:
    client.create_topic("empty", 2)
    with client.reader("empty") as reader:
        started = time.monotonic()
        assert reader.read_next(timeout=0.3) is None
        assert time.monotonic() - started >= 0.29


def test_event_above_max_event_bytes_is_refused_before_sending(client: folio.Client) -> None:
    client.create_topic("small", 1, max_event_bytes=1000)
    with client.writer("small") as writer:
        with pytest.raises(folio.EventTooLargeError) as caught:
            writer.write_event(b"x" * 1001)
        assert (caught.value.size, caught.value.limit) == (1001, 1000)
        assert "1000" in str(caught.value)
        assert writer.write_event(b"x" * 1000).result(timeout=30).offset == 0
    assert client.get_segment_info("small/0").segment.end_offset == 1


def test_truncated_offset_raises_out_of_range(client: folio.Client) -> None:
    client.create_topic("trunc", 1, ledger_rollover_bytes=1024)
    with client.writer("trunc") as writer:
        for i in range(20):  # one block (and, past 1 KiB, a new ledger) each
            writer.write_event(b"y" * 600 + b"%d" % i)
            writer.flush(30)
    before = client.get_segment_info("trunc/0")
    assert len(before.ledgers) > 2
    info = client.truncate_segment("trunc/0", 15)
    start = info.segment.start_offset
    assert 0 < start <= 15
    with client.reader("trunc", {"trunc/0": 0}) as reader:
        with pytest.raises(folio.OffsetOutOfRangeError) as caught:
            reader.read_next(timeout=30)
        assert caught.value.start_offset == start
    with client.reader("trunc") as earliest:
        assert [e.offset for e in _read_all(earliest, 20 - start)] == list(range(start, 20))


def test_closing_the_client_closes_its_writers_and_readers(server: BookieProcess) -> None:
    client = folio.Client(server.address)
    client.create_topic("closing", 1)
    writer = client.writer("closing")
    future = writer.write_event(b"last words")
    reader = client.reader("closing")
    client.close()
    assert writer.closed and reader.closed
    assert future.result(timeout=0).offset == 0  # closing flushed it
    with pytest.raises(folio.WriterClosedError):
        writer.write_event(b"too late")
    assert reader.read_next(timeout=0.1) is None


def test_leaving_a_for_loop_early_loses_no_event(client: folio.Client) -> None:
    client.create_topic("early-break", 1)
    with client.writer("early-break") as writer:
        for number in range(10):
            writer.write_event(b"e%d" % number)
    with client.reader("early-break") as reader:
        first = []
        for event in reader:
            first.append(event.offset)
            if len(first) == 3:
                break
        assert reader.positions == {"early-break/0": 3}
        rest: list[int] = []
        while len(rest) < 7 and (later := reader.read_next(timeout=10)) is not None:
            rest.append(later.offset)
    assert (first, rest) == ([0, 1, 2], [3, 4, 5, 6, 7, 8, 9])


def test_read_many_hands_over_what_read_next_would(client: folio.Client) -> None:
    client.create_topic("many", 3)
    with client.writer("many", folio.JsonSerializer(), linger_ms=2,
                       batch_size_bytes=1024) as writer:
        for i in range(600):
            writer.write_event({"i": i}, f"k{i % 7}")
    with client.reader("many", serializer=folio.JsonSerializer()) as one_by_one:
        expected = _read_all(one_by_one, 600)
    got: list[folio.Event[Any]] = []
    with client.reader("many", serializer=folio.JsonSerializer()) as reader:
        deadline = time.monotonic() + 30
        while len(got) < 600 and time.monotonic() < deadline:
            events = reader.read_many(max_events=50, timeout=1.0)
            assert len(events) <= 50
            got += events
        assert reader.read_many(timeout=0.1) == []
        positions = reader.positions
    # The same events (each segment's in offset order), and positions after the last.
    assert len(got) == 600
    for segment in ("many/0", "many/1", "many/2"):
        mine = [(e.offset, e.payload, e.routing_key) for e in got if e.segment == segment]
        assert mine == [(e.offset, e.payload, e.routing_key) for e in expected
                        if e.segment == segment]
        assert positions[segment] == len(mine)
