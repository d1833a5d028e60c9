"""Reader groups, checkpoints and positions against a real ``folio standalone``.

Segments spread evenly across readers; readers join, leave and go offline
mid-stream without losing or repeating events; checkpoints restore into a new
group exactly; the group state changes by compare-and-set only (a stale
version is refused with FAILED_PRECONDITION); typed errors for bad input.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import grpc
import pytest

import folio
from folio.api.v1 import groups_pb2, groups_pb2_grpc
from folio.read.cuts import Checkpoint, Position, StreamCut
from folio.read.groups import EventRead, GroupReader
from tests.support.bookies import BookieProcess, folio_argv, folio_env


def _write(client: folio.Client, topic: str, keys: int, per_key: int,
           prefix: str = "") -> list[tuple[str, bytes]]:
    """``keys * per_key`` events, key ``k<i>`` with payloads ``<prefix><i>:<n>`` in order."""
    written = []
    with client.writer(topic) as writer:
        futures = []
        for n in range(per_key):
            for i in range(keys):
                payload = f"{prefix}{i}:{n}".encode()
                futures.append(writer.write_event(payload, routing_key=f"k{i}"))
                written.append((f"k{i}", payload))
        writer.flush()
        for future in futures:
            future.result(30)
    return written


def _drain(readers: list[GroupReader[Any]], until: int, got: list[EventRead[Any]],
           timeout_s: float = 90.0, stop: Callable[[], bool] | None = None) -> None:
    """Every reader reads on a thread of its own (as applications do) into ``got``.

    Until ``got`` holds ``until`` events (checkpoint events not counted), or
    ``stop()`` is true when given.
    """
    lock = threading.Lock()
    failures: list[BaseException] = []
    events = [sum(1 for r in got if not r.is_checkpoint)]

    def done() -> bool:
        if stop is not None:
            return stop()
        return events[0] >= until

    def run(reader: GroupReader[Any]) -> None:
        try:
            while not failures and not done():
                read = reader.read_next(timeout=0.05)
                if read is not None:
                    with lock:
                        got.append(read)
                        events[0] += not read.is_checkpoint
        except BaseException as error:  # reported by the test thread
            failures.append(error)

    threads = [threading.Thread(target=run, args=(reader,)) for reader in readers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout_s)
    assert not failures, failures
    assert not any(t.is_alive() for t in threads), f"only {len(got)} of {until} in time"
    assert done()


def _payloads(reads: list[EventRead[Any]]) -> list[bytes]:
    return [r.event.payload for r in reads if r.event is not None]


def _check_order(reads: list[EventRead[Any]]) -> None:
    """Per key, payload numbers strictly increase (write order, no repeats)."""
    last: dict[str, int] = {}
    for read in reads:
        if read.event is None:
            continue
        key, n = read.event.payload.decode().split(":")
        assert int(n) > last.get(key, -1), f"key {key}: {n} after {last.get(key)}"
        last[key] = int(n)


def test_three_readers_share_segments_evenly_and_read_everything(
        client: folio.Client) -> None:
    client.create_topic("rg-even", 6)
    written = _write(client, "rg-even", keys=30, per_key=20)
    group = client.reader_group("g-even", ["rg-even"], sync_interval_ms=50)
    readers = [group.reader(f"r{i}") for i in range(3)]
    got: list[EventRead[Any]] = []
    _drain(readers, len(written), got)
    assert Counter(_payloads(got)) == Counter(p for _, p in written)
    _check_order(got)
    held = group.assignment()
    assert sorted(len(held[f"r{i}"]) for i in range(3)) == [2, 2, 2]
    assert held[""] == []
    for reader in readers:
        reader.close()
    assert group.online_readers() == []
    assert sorted(group.assignment()[""]) == [f"rg-even/{i}" for i in range(6)]


def test_read_many_lists_the_reads_read_next_would(client: folio.Client) -> None:
    client.create_topic("rg-many", 2)
    written = _write(client, "rg-many", keys=6, per_key=60)
    group = client.reader_group("g-many", ["rg-many"], sync_interval_ms=50)
    with group.reader("solo") as reader:
        got: list[EventRead[Any]] = []
        checkpoint = None
        deadline = time.monotonic() + 60
        while len(_payloads(got)) < len(written) or checkpoint is None or not checkpoint.done():
            assert time.monotonic() < deadline, f"{len(_payloads(got))} of {len(written)}"
            if checkpoint is None and len(_payloads(got)) >= len(written) // 2:
                checkpoint = group.initiate_checkpoint("half", timeout=60)
            reads = reader.read_many(max_events=40, timeout=0.2)
            assert len(reads) <= 40
            assert all(not read.is_checkpoint for read in reads) or len(reads) == 1
            got += reads
        with pytest.raises(folio.InvalidArgumentError):
            reader.read_many(max_events=0)
    assert Counter(_payloads(got)) == Counter(p for _, p in written)
    _check_order(got)
    assert [read.checkpoint_name for read in got if read.is_checkpoint] == ["half"]
    # Each read carries the reader's position just after it, as read_next's would.
    expected = {"rg-many/0": 0, "rg-many/1": 0}
    for read in got:
        if read.event is not None:
            expected[read.event.segment] = read.event.offset + 1
        assert dict(read.position.positions) == expected


def test_checkpoint_then_new_group_resumes_exactly_there(client: folio.Client) -> None:
    client.create_topic("rg-cp", 4)
    first = _write(client, "rg-cp", keys=12, per_key=10, prefix="a")
    group = client.reader_group("g-cp", ["rg-cp"], sync_interval_ms=50)
    readers = [group.reader("x"), group.reader("y")]
    got: list[EventRead[Any]] = []
    _drain(readers, len(first), got)
    future = group.initiate_checkpoint("cp1", timeout=60)
    _drain(readers, 0, got, stop=future.done)
    checkpoint = future.result()
    assert sum(1 for r in got if r.checkpoint_name == "cp1") == 2
    assert checkpoint.name == "cp1" and checkpoint.group == "g-cp"
    restored = Checkpoint.from_bytes(checkpoint.to_bytes())
    assert restored == checkpoint == Checkpoint.from_json(checkpoint.to_json())
    second = _write(client, "rg-cp", keys=12, per_key=5, prefix="b")
    # Events after the checkpoint event (none here: all "a" were read before it).
    fresh = client.reader_group("g-cp-2", ["rg-cp"], start=restored, sync_interval_ms=50)
    new_reader = fresh.reader("z")
    again: list[EventRead[Any]] = []
    _drain([new_reader], len(second), again)
    assert Counter(_payloads(again)) == Counter(p for _, p in second)
    assert new_reader.read_next(timeout=0.3) is None
    for reader in (*readers, new_reader):
        reader.close()


def test_checkpoint_mid_stream_splits_events_exactly(client: folio.Client) -> None:
    client.create_topic("rg-mid", 3)
    written = _write(client, "rg-mid", keys=9, per_key=40)
    group = client.reader_group("g-mid", ["rg-mid"], sync_interval_ms=50)
    readers = [group.reader("m1"), group.reader("m2")]
    got: list[EventRead[Any]] = []
    _drain(readers, 30, got)  # some events read before the checkpoint begins
    future = group.initiate_checkpoint("mid", timeout=60)
    _drain(readers, len(written), got)
    _drain(readers, 0, got, stop=future.done)  # both readers pass it
    checkpoint = future.result(60)
    # Per reader: events returned after its checkpoint event come after the checkpoint.
    after: list[bytes] = []
    for reader in readers:
        mine = [r for r in got if r.position.reader_id == reader.reader_id]
        marks = [i for i, r in enumerate(mine) if r.checkpoint_name == "mid"]
        assert len(marks) == 1
        after += _payloads(mine[marks[0] + 1:])
    fresh = client.reader_group("g-mid-2", ["rg-mid"], start=checkpoint, sync_interval_ms=50)
    replay = fresh.reader("solo")
    again: list[EventRead[Any]] = []
    if after:
        _drain([replay], len(after), again)
    assert Counter(_payloads(again)) == Counter(after)
    assert replay.read_next(timeout=0.3) is None
    assert len(_payloads(got)) == len(written)
    for reader in (*readers, replay):
        reader.close()


def test_reader_offline_with_position_loses_nothing_and_repeats_nothing(
        client: folio.Client) -> None:
    client.create_topic("rg-off", 4)
    written = _write(client, "rg-off", keys=16, per_key=25)
    group = client.reader_group("g-off", ["rg-off"], sync_interval_ms=50)
    a, b = group.reader("a"), group.reader("b")
    got: list[EventRead[Any]] = []
    _drain([a, b], 100, got)
    # "a" crashes having processed (and persisted the position of) only half of
    # what it read: the rest of what it read must come again, nothing before it.
    reads_a = [r for r in got if r.event is not None and r.position.reader_id == "a"]
    assert reads_a, "reader a read nothing"
    kept = reads_a[: len(reads_a) // 2 + 1]
    persisted = Position.from_bytes(kept[-1].position.to_bytes())
    lost = {id(r) for r in reads_a[len(kept):]}
    processed = [r for r in got if id(r) not in lost]
    a._streams.close()  # the crash: no clean leave
    # What "a" had unpacked stays readable after close (SegmentStreams.close);
    # the crashed process would never return it: its next call syncs first.
    a._next_sync = 0.0
    group.reader_offline("a", persisted)
    assert group.online_readers() == ["b"]
    with pytest.raises(folio.ReaderNotInGroupError):
        a.read_next(timeout=10)
    c = group.reader("c")
    rest: list[EventRead[Any]] = []
    _drain([b, c], len(written) - len(processed), rest)
    assert Counter(_payloads(processed + rest)) == Counter(p for _, p in written)
    assert b.read_next(timeout=0.3) is None and c.read_next(timeout=0.3) is None
    _check_order(processed + rest)
    for reader in (b, c):
        reader.close()


def test_readers_join_and_leave_mid_stream(client: folio.Client) -> None:
    client.create_topic("rg-join", 6)
    written = _write(client, "rg-join", keys=24, per_key=30)
    group = client.reader_group("g-join", ["rg-join"], sync_interval_ms=50)
    first = group.reader("first")
    got: list[EventRead[Any]] = []
    _drain([first], 120, got)
    assert len(first.segments) == 6
    second = group.reader("second")
    # Rebalancing happens at checkpoints: the first reader gives back half.
    future = group.initiate_checkpoint("rebalance", timeout=60)
    _drain([first, second], 0, got, stop=future.done)
    _drain([first, second], 300, got)
    assert len(second.segments) > 0
    first.close()  # leaves cleanly: hands its segments back at its position
    _drain([second], len(written), got)
    assert Counter(_payloads(got)) == Counter(p for _, p in written)
    _check_order(got)
    second.close()


def test_state_changes_only_by_compare_and_set(server: BookieProcess,
                                               client: folio.Client) -> None:
    client.create_topic("rg-cas", 2)
    client.reader_group("g-cas", ["rg-cas"])
    with grpc.insecure_channel(server.address) as channel:
        stub = groups_pb2_grpc.ReaderGroupsStub(channel)
        got = stub.GetReaderGroup(groups_pb2.GetReaderGroupRequest(name="g-cas"))
        assert got.version == 0 and sorted(got.state.topics) == ["rg-cas"]
        state = groups_pb2.ReaderGroupState()
        state.CopyFrom(got.state)
        updated = stub.UpdateReaderGroup(groups_pb2.UpdateReaderGroupRequest(
            name="g-cas", expected_version=0, state=state))
        assert updated.version == 1
        with pytest.raises(grpc.RpcError) as stale:
            stub.UpdateReaderGroup(groups_pb2.UpdateReaderGroupRequest(
                name="g-cas", expected_version=0, state=state))
        assert stale.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "version 1, not 0" in (stale.value.details() or "")
        bad = groups_pb2.ReaderGroupState()
        bad.CopyFrom(state)
        bad.format = 99
        with pytest.raises(grpc.RpcError) as unknown:
            stub.UpdateReaderGroup(groups_pb2.UpdateReaderGroupRequest(
                name="g-cas", expected_version=1, state=bad))
        assert unknown.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    # Many readers joining at once: each CAS conflict is retried, none is lost.
    group = client.reader_group("g-cas")
    readers = [group.reader(f"r{i}") for i in range(5)]
    assert group.online_readers() == [f"r{i}" for i in range(5)]
    for reader in readers:
        reader.close()


def test_typed_errors(client: folio.Client) -> None:
    client.create_topic("rg-err", 1)
    with pytest.raises(folio.ReaderGroupNotFoundError):
        client.reader_group("nope")
    with pytest.raises(folio.TopicNotFoundError):
        client.reader_group("g-err", ["no-such-topic"])
    with pytest.raises(folio.InvalidArgumentError):
        client.reader_group("_bad", ["rg-err"])
    group = client.reader_group("g-err", ["rg-err"])
    with pytest.raises(folio.InvalidArgumentError):
        client.reader_group("g-err", ["rg-cas"])
    reader = group.reader("one")
    with pytest.raises(folio.InvalidArgumentError, match="already a member"):
        group.reader("one")
    with pytest.raises(folio.InvalidArgumentError, match="already has a checkpoint"):
        group.initiate_checkpoint("c")
        group.initiate_checkpoint("c")
    reader.close()
    assert "g-err" in client.list_reader_groups()
    client.delete_reader_group("g-err")
    with pytest.raises(folio.ReaderGroupNotFoundError):
        client.delete_reader_group("g-err")
    with pytest.raises(folio.InvalidArgumentError):
        StreamCut({"rg-err/0": -1})


def _scale_plan(client: folio.Client, topic: str, step: int) -> None:
    """Split the widest open segment in two (even steps) or merge two neighbours (odd)."""
    active = sorted(client.get_segments(topic), key=lambda s: s.key_low)
    if step % 2 == 0 or len(active) < 2:
        widest = max(active, key=lambda s: s.key_high - s.key_low)
        middle = (widest.key_low + widest.key_high) / 2
        client.scale_topic(topic, [widest.name],
                           [(widest.key_low, middle), (middle, widest.key_high)])
    else:
        left, right = active[step % (len(active) - 1)], active[step % (len(active) - 1) + 1]
        client.scale_topic(topic, [left.name, right.name], [(left.key_low, right.key_high)])


def test_group_reads_in_key_order_while_the_topic_splits_and_merges(
        client: folio.Client) -> None:
    """3 readers, 4 concurrent writers on 64 keys, 6 scalings: per key in order, once each."""
    client.create_topic("rg-scale", 2)
    group = client.reader_group("g-scale", ["rg-scale"], sync_interval_ms=50)
    readers = [group.reader(f"s{i}") for i in range(3)]
    per_key, writers_n, keys_per_writer = 60, 4, 16
    total = per_key * writers_n * keys_per_writer
    errors: list[BaseException] = []

    def write(w: int) -> None:
        try:
            with client.writer("rg-scale", linger_ms=1) as writer:
                for n in range(per_key):
                    futures = [writer.write_event(f"w{w}k{i}:{n}".encode(),
                                                  routing_key=f"w{w}k{i}")
                               for i in range(keys_per_writer)]
                    for future in futures:
                        future.result(60)
        except BaseException as error:  # reported by the test thread
            errors.append(error)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers_n)]
    for thread in threads:
        thread.start()
    got: list[EventRead[Any]] = []
    step = 0

    scaling = threading.Lock()

    def scale_as_we_go() -> bool:
        """Called by the reader threads between reads: scales at 1/8, 2/8, ... of the events."""
        nonlocal step
        count = len(got)  # no checkpoints in this test: every read is an event
        with scaling:
            if step < 6 and count >= (step + 1) * total // 8:
                _scale_plan(client, "rg-scale", step)
                step += 1
        return count >= total

    _drain(readers, total, got, timeout_s=120, stop=scale_as_we_go)
    for thread in threads:
        thread.join(60)
    assert not errors, errors
    assert step == 6
    payloads = _payloads(got)
    assert len(payloads) == total and len(set(payloads)) == total
    _check_order(got)
    # Every sealed segment was read to its end and handed over: nothing held or waiting.
    assert group.waiting_segments() == {}
    assert all(reader.read_next(timeout=0.2) is None for reader in readers)
    segments = client.get_segments("rg-scale", include_sealed=True)
    assert sum(1 for s in segments if s.sealed) >= 6
    for reader in readers:
        reader.close()


def test_cli_consume_group_members_share_and_hand_over(server: BookieProcess,
                                                       client: folio.Client) -> None:
    """`folio consume NAME --group G`: one member reads 30 and leaves, the next the rest."""
    client.create_topic("rg-cli", 3)
    written = _write(client, "rg-cli", keys=6, per_key=10)

    def consume(*args: str) -> list[str]:
        done = subprocess.run(
            [*folio_argv("consume", "rg-cli", "--group", "g-cli", "--from-beginning",
                         "--endpoint", server.address, *args)],
            env=folio_env(), capture_output=True, timeout=120, check=False)
        assert done.returncode == 0, done.stderr
        return done.stdout.decode().splitlines()

    first = consume("--max-events", "30", "--reader-id", "one")
    rest = consume("--timeout-ms", "1500", "--reader-id", "two")
    assert len(first) == 30
    assert Counter(first + rest) == Counter(p.decode() for _, p in written)
    assert client.reader_group("g-cli").online_readers() == []
