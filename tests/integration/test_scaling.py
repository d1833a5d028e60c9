"""Scaling against a real ``folio standalone``: ScaleTopic, successors, writers and readers.

Writers run on many routing keys from several threads while the topic is
split and merged several times; every event is then read back segment by
segment in creation order (a predecessor before its successors) and per key
must come in write order, none missing, none twice. A single-routing-key
transaction held up in a paused proxy while its segment is sealed must show
up once, whole, in the successor.
"""

from __future__ import annotations

import collections
import itertools
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from functools import partial

import pytest

import folio
from folio.api.v1.routing import routing_point
from folio.models import SegmentRange
from tests.support.bookies import BookieProcess, BookieProcesses
from tests.support.catch_up import read_to_sentinels
from tests.support.proxy import TcpProxy
from tests.support.standalone import start_standalone
from tests.support.wait import wait_for

DEADLINE_S = 60.0


def _read_in_creation_order(client: folio.Client, topic: str) -> list[folio.Event[bytes]]:
    """Every event, segment by segment by number (predecessors first), each to its end."""
    segments = client.get_segments(topic, include_sealed=True)
    events: list[folio.Event[bytes]] = []
    for segment in segments:
        if segment.end_offset == segment.start_offset:
            continue
        with client.reader(topic, {segment.name: segment.start_offset}) as reader:
            got = 0
            wanted = segment.end_offset - segment.start_offset
            while got < wanted:
                event = reader.read_next(timeout=DEADLINE_S)
                assert event is not None, f"{segment.name}: {got} of {wanted} events read"
                if event.segment != segment.name:
                    continue  # another active segment the reader also reads
                events.append(event)
                got += 1
    return events


def _reached(progress: list[int], target: int) -> bool:
    return progress[0] >= target


def _check_per_key_order(events: list[folio.Event[bytes]],
                         written: dict[str, int]) -> None:
    per_key: dict[str, list[int]] = collections.defaultdict(list)
    for event in events:
        key, number = event.payload.decode().split(":")
        assert event.routing_key == key
        per_key[key].append(int(number))
    assert set(per_key) == set(written)
    for key, numbers in per_key.items():
        assert numbers == list(range(written[key])), f"key {key}: not in write order, or " \
            f"missing / duplicated events"


def test_scale_topic_split_merge_both_and_refusals(client: folio.Client) -> None:
    client.create_topic("scale-api", 2)
    split = client.scale_topic("scale-api", ["scale-api/0"], [(0.0, 0.25), (0.25, 0.5)])
    assert [(s.name, s.sealed, s.successors) for s in split.sealed] == [
        ("scale-api/0", True, ("scale-api/2", "scale-api/3"))]
    assert [(s.name, s.key_low, s.key_high, s.predecessors) for s in split.created] == [
        ("scale-api/2", 0.0, 0.25, ("scale-api/0",)),
        ("scale-api/3", 0.25, 0.5, ("scale-api/0",))]
    merge = client.scale_topic("scale-api", ["scale-api/3", "scale-api/1"], [(0.25, 1.0)])
    assert [(s.name, s.predecessors) for s in merge.created] == [
        ("scale-api/4", ("scale-api/1", "scale-api/3"))]
    both = client.scale_topic("scale-api", ["scale-api/2", "scale-api/4"],
                              [(0.0, 0.6), (0.6, 1.0)])
    assert [(s.name, s.predecessors) for s in both.created] == [
        ("scale-api/5", ("scale-api/2", "scale-api/4")), ("scale-api/6", ("scale-api/4",))]
    assert [s.name for s in client.get_successors("scale-api/4")] == [
        "scale-api/5", "scale-api/6"]
    assert client.get_successors("scale-api/5") == []
    every = client.get_segments("scale-api", include_sealed=True)
    assert [(s.number, s.sealed) for s in every] == [
        (0, True), (1, True), (2, True), (3, True), (4, True), (5, False), (6, False)]
    assert [s.name for s in client.get_topic("scale-api").segments] == [
        "scale-api/5", "scale-api/6"]

    with pytest.raises(folio.InvalidArgumentError, match=r"leave \[0.5, 0.6\)"):
        client.scale_topic("scale-api", ["scale-api/5"], [(0.0, 0.5)])
    with pytest.raises(folio.InvalidArgumentError, match="overlap"):
        client.scale_topic("scale-api", ["scale-api/5", "scale-api/6"],
                           [(0.0, 0.7), (0.6, 1.0)])
    with pytest.raises(folio.InvalidArgumentError, match="reaches outside"):
        client.scale_topic("scale-api", ["scale-api/6"], [(0.5, 1.0)])
    with pytest.raises(folio.InvalidArgumentError, match="not a segment of topic"):
        client.scale_topic("scale-api", ["orders/0"], [(0.0, 1.0)])
    with pytest.raises(folio.SegmentSealedError) as sealed:
        client.scale_topic("scale-api", ["scale-api/0"], [(0.0, 0.5)])
    assert sealed.value.segment == "scale-api/0"
    with pytest.raises(folio.NoSuchSegmentError):
        client.scale_topic("scale-api", ["scale-api/77"], [(0.0, 0.5)])
    with pytest.raises(folio.NoSuchSegmentError):
        client.get_successors("scale-api/77")
    with pytest.raises(folio.TopicNotFoundError):
        client.scale_topic("no-such-topic", ["no-such-topic/0"], [(0.0, 1.0)])
    # Refusals changed nothing.
    assert len(client.get_segments("scale-api", include_sealed=True)) == 7


def test_writers_on_many_keys_across_splits_and_merges(client: folio.Client) -> None:
    topic = "scale-writers"
    client.create_topic(topic, 2)
    keys = [f"key-{i}" for i in range(64)]
    written: dict[str, int] = dict.fromkeys(keys, 0)
    acked = [0]
    lock = threading.Lock()
    stop = threading.Event()
    failures: list[BaseException] = []

    def count(future: folio.WriteFuture) -> None:
        with lock:
            acked[0] += 1

    def write(mine: list[str]) -> None:
        with client.writer(topic, linger_ms=1, batch_size_bytes=4096,
                           max_in_flight=3) as writer:
            futures = []
            for round_ in itertools.count():
                if stop.is_set():
                    break
                for key in mine:
                    future = writer.write_event(f"{key}:{round_}".encode(), routing_key=key)
                    future.add_done_callback(count)
                    futures.append(future)
                    written[key] = round_ + 1
            writer.flush(DEADLINE_S)
            failures.extend(e for e in (f.exception(0) for f in futures) if e is not None)

    threads = [threading.Thread(target=write, args=(keys[i::3],)) for i in range(3)]
    for thread in threads:
        thread.start()
    try:
        def more_acked(events: int) -> None:
            with lock:
                target = acked[0] + events
            wait_for(lambda: acked[0] >= target, f"{events} more acknowledged events", DEADLINE_S)

        more_acked(2000)
        client.scale_topic(topic, [f"{topic}/0"], [(0.0, 0.25), (0.25, 0.5)])   # split
        more_acked(2000)
        client.scale_topic(topic, [f"{topic}/1", f"{topic}/3"], [(0.25, 1.0)])  # merge
        more_acked(2000)
        client.scale_topic(topic, [f"{topic}/2", f"{topic}/4"],                 # both
                           [(0.0, 0.4), (0.4, 0.7), (0.7, 1.0)])
        more_acked(2000)
        client.scale_topic(topic, [f"{topic}/5", f"{topic}/6", f"{topic}/7"], [(0.0, 1.0)])
        more_acked(2000)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert failures == []
    segments = client.get_segments(topic, include_sealed=True)
    assert len(segments) == 9 and all(s.end_offset > 0 for s in segments)
    events = _read_in_creation_order(client, topic)
    assert len(events) == sum(written.values())
    _check_per_key_order(events, written)

    # A plain reader follows the segments across the scalings by itself.
    with client.reader(topic) as reader:
        followed = [reader.read_next(timeout=DEADLINE_S) for _ in range(len(events))]
        assert read_to_sentinels(client, topic, reader, b"sentinel") == []
    assert all(event is not None for event in followed)
    _check_per_key_order([e for e in followed if e is not None], written)


def test_keyless_events_follow_a_split(client: folio.Client) -> None:
    client.create_topic("scale-keyless", 1)
    with client.writer("scale-keyless", linger_ms=1) as writer:
        before = [writer.write_event(b"a%d" % i) for i in range(100)]
        writer.flush(DEADLINE_S)
        client.scale_topic("scale-keyless", ["scale-keyless/0"], [(0.0, 0.5), (0.5, 1.0)])
        after = [writer.write_event(b"b%d" % i) for i in range(100)]
        writer.flush(DEADLINE_S)
    assert {f.result(0).segment for f in before} == {"scale-keyless/0"}
    assert {f.result(0).segment for f in after} <= {"scale-keyless/1", "scale-keyless/2"}
    payloads = sorted(e.payload for e in _read_in_creation_order(client, "scale-keyless"))
    assert payloads == sorted([b"a%d" % i for i in range(100)] + [b"b%d" % i for i in range(100)])


def test_a_sealed_topic_takes_no_more_events_and_stays_readable(
        client: folio.Client) -> None:
    client.create_topic("scale-sealed", 2)
    with client.writer("scale-sealed") as writer:
        for i in range(10):
            writer.write_event(b"%d" % i, routing_key=f"k{i}")
        writer.flush(DEADLINE_S)
        topic = client.seal_topic("scale-sealed")
        assert topic.sealed and topic.segments == ()
        late = writer.write_event(b"late", routing_key="k1")
        with pytest.raises(folio.SegmentSealedError, match="sealed"):
            late.result(timeout=DEADLINE_S)
        with pytest.raises(folio.SegmentSealedError):
            writer.flush(DEADLINE_S)
    assert client.seal_topic("scale-sealed").sealed  # idempotent
    with pytest.raises(folio.SegmentSealedError, match="is sealed"):
        client.writer("scale-sealed")
    with client.reader("scale-sealed") as reader:
        payloads = sorted(reader.read_next(timeout=DEADLINE_S).payload  # type: ignore[union-attr]
                          for _ in range(10))
    # Nothing more exists to be read: the sealed segments end at 10 events in all.
    assert sum(s.end_offset - s.start_offset
               for s in client.get_segments("scale-sealed", include_sealed=True)) == 10
    assert payloads == sorted(b"%d" % i for i in range(10))


def test_a_transaction_cut_by_a_seal_is_visible_once_whole_in_the_successor(
        client: folio.Client, proxy: TcpProxy) -> None:
    topic = "scale-txn"
    client.create_topic(topic, 1)
    with folio.Client(proxy.address, timeout_s=30) as through_proxy, \
            through_proxy.single_routing_key_txn_writer(topic, "the-key") as writer:
        first = writer.begin()
        first.write_event(b"before-0")
        assert first.commit(timeout=DEADLINE_S).segment == f"{topic}/0"
        txn = writer.begin()
        for i in range(50):
            txn.write_event(b"cut-%d" % i + b"x" * 50_000)  # 2.5 MB: several blocks
        proxy.pause()  # the commit's blocks wait in the proxy...
        future = txn.commit_async()
        client.scale_topic(topic, [f"{topic}/0"], [(0.0, 0.5), (0.5, 1.0)])  # ...the seal
        proxy.resume()
        result = future.result(DEADLINE_S)
        owner = next(s for s in client.get_segments(topic)
                     if s.owns(routing_point("the-key")))
        assert result.segment == owner.name and result.event_count == 50
    assert client.get_segment_info(f"{topic}/0").segment.end_offset == 1
    events = _read_in_creation_order(client, topic)
    payloads = [e.payload.split(b"x")[0] for e in events]
    assert payloads == [b"before-0"] + [b"cut-%d" % i for i in range(50)]
    assert {e.segment for e in events[1:]} == {owner.name}
    offsets = [e.offset for e in events[1:]]
    assert offsets == list(range(offsets[0], offsets[0] + 50))  # contiguous: one entry


def test_writers_through_cut_connections_across_scaling(client: folio.Client,
                                                        proxy: TcpProxy) -> None:
    """Connections cut right after each seal: exactly once and in order all the same."""
    topic = "scale-cuts"
    client.create_topic(topic, 2)
    keys = [f"key-{i}" for i in range(32)]
    written: dict[str, int] = dict.fromkeys(keys, 0)
    committed: list[int] = []
    progress = [0]
    stop = threading.Event()
    failures: list[BaseException] = []

    def bump(_: object) -> None:
        progress[0] += 1

    with folio.Client(proxy.address, timeout_s=30) as through:
        def write_events() -> None:
            with through.writer(topic, linger_ms=1, batch_size_bytes=2048) as writer:
                futures = []
                for round_ in itertools.count():
                    if stop.is_set():
                        break
                    for key in keys:
                        future = writer.write_event(f"{key}:{round_}".encode(),
                                                    routing_key=key)
                        future.add_done_callback(bump)
                        futures.append(future)
                        written[key] = round_ + 1
                writer.flush(DEADLINE_S)
                failures.extend(e for e in (f.exception(0) for f in futures) if e is not None)

        def write_transactions() -> None:
            with through.single_routing_key_txn_writer(topic, "txn-key") as writer:
                for number in itertools.count():
                    if stop.is_set():
                        break
                    txn = writer.begin()
                    for part in range(5):
                        txn.write_event(f"txn-key:{number}.{part}".encode())
                    try:
                        txn.commit(timeout=DEADLINE_S)
                    except folio.FolioError as error:
                        failures.append(error)
                        break
                    committed.append(number)
                    progress[0] += 1

        threads = [threading.Thread(target=write_events),
                   threading.Thread(target=write_transactions)]
        for thread in threads:
            thread.start()
        try:
            plans = [([f"{topic}/0"], [(0.0, 0.25), (0.25, 0.5)]),
                     ([f"{topic}/1", f"{topic}/3"], [(0.25, 1.0)]),
                     ([f"{topic}/2", f"{topic}/4"], [(0.0, 0.5), (0.5, 1.0)]),
                     ([f"{topic}/5", f"{topic}/6"], [(0.0, 1.0)])]
            for seal, ranges in plans:
                target = progress[0] + 1000
                wait_for(partial(_reached, progress, target), "writes to go on", DEADLINE_S)
                client.scale_topic(topic, seal, ranges)
                proxy.cut()  # every stream breaks while the writers find the seal
            target = progress[0] + 1000
            wait_for(lambda: progress[0] >= target, "writes after the last scaling", DEADLINE_S)
        finally:
            stop.set()
            for thread in threads:
                thread.join()
    assert failures == []
    events = _read_in_creation_order(client, topic)
    transactional = [e for e in events if e.routing_key == "txn-key"]
    assert [e.payload.decode() for e in transactional] == [
        f"txn-key:{n}.{p}" for n in committed for p in range(5)]
    for first in range(0, len(transactional), 5):  # each one whole: one entry
        whole = transactional[first:first + 5]
        assert len({e.segment for e in whole}) == 1
        assert [e.offset for e in whole] == list(range(whole[0].offset, whole[0].offset + 5))
    _check_per_key_order([e for e in events if e.routing_key != "txn-key"], written)


@pytest.fixture(scope="module")
def fast_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BookieProcess]:
    """A standalone whose maintenance round (auto-scaling) runs every 0.2 s."""
    processes = BookieProcesses()
    started = start_standalone(processes, tmp_path_factory.mktemp("fast") / "data",
                               "--retention-interval-s", "0.2")
    yield started
    try:
        started.terminate()
    finally:
        processes.kill_all()


def test_auto_scaling_splits_under_load_and_merges_back_when_idle(
        fast_server: BookieProcess) -> None:
    topic = "auto"
    with folio.Client(fast_server.address, timeout_s=30) as client:
        client.create_topic(topic, 1, scale_target_events_per_s=200, scale_min_segments=1,
                            scale_cooldown_ms=500)
        written: dict[str, int] = collections.defaultdict(int)

        def open_segments() -> list[SegmentRange]:
            return list(client.get_topic(topic).segments)

        with client.writer(topic, linger_ms=1) as writer:
            deadline = time.monotonic() + DEADLINE_S
            # Write until the broker split the topic and every open segment took events.
            while not (len(segments := open_segments()) >= 2
                       and all(s.end_offset > 0 for s in segments)):
                assert time.monotonic() < deadline, "the topic was never split"
                for i in range(500):
                    key = f"k{i % 50}"
                    writer.write_event(f"{key}:{written[key]}".encode(), routing_key=key)
                    written[key] += 1
                writer.flush(DEADLINE_S)
        wait_for(lambda: len(open_segments()) == 1, "auto-scaling to merge back to one", DEADLINE_S)
        every = client.get_segments(topic, include_sealed=True)
        assert len(every) >= 4  # the first, at least two halves, a merge
        assert every[0].sealed and every[0].successors
        _check_per_key_order(_read_in_creation_order(client, topic), dict(written))


def test_cli_scale_describe_and_seal(server: BookieProcess) -> None:
    def folio_cli(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "folio.cli", *argv, "--endpoint", server.address],
            capture_output=True, text=True, timeout=DEADLINE_S, check=False)

    assert folio_cli("topic", "create", "scale-cli", "--segments", "2").returncode == 0
    split = folio_cli("topic", "scale", "scale-cli", "--seal", "0",
                      "--ranges", "0.0-0.25,0.25-0.5")
    assert split.returncode == 0, split.stderr
    assert "sealed 1, created 2" in split.stdout and "scale-cli/3" in split.stdout
    merge = folio_cli("topic", "scale", "scale-cli", "--seal", "scale-cli/1,3",
                      "--ranges", "0.25-1.0")
    assert merge.returncode == 0, merge.stderr
    bad = folio_cli("topic", "scale", "scale-cli", "--seal", "2", "--ranges", "0.0-0.3")
    assert bad.returncode == 1 and bad.stderr.startswith("folio topic scale: error: ")
    assert "reaches outside" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
    usage = folio_cli("topic", "scale", "scale-cli", "--seal", "2", "--ranges", "half")
    assert usage.returncode == 2 and "LOW-HIGH" in usage.stderr

    described = folio_cli("topic", "describe", "scale-cli", "--json")
    assert described.returncode == 0
    document = json.loads(described.stdout)
    rows = {s["name"]: s for s in document["segments"]}
    assert list(rows) == [f"scale-cli/{n}" for n in range(5)]
    assert rows["scale-cli/0"]["state"] == "sealed"
    assert rows["scale-cli/0"]["successors"] == ["scale-cli/2", "scale-cli/3"]
    assert rows["scale-cli/4"] == {
        "name": "scale-cli/4", "number": 4, "key_low": 0.25, "key_high": 1.0,
        "state": "open", "sealed": False, "start_offset": 0, "end_offset": 0, "length": 0,
        "predecessors": ["scale-cli/1", "scale-cli/3"], "successors": [],
        "owner": server.address}
    human = folio_cli("topic", "describe", "scale-cli")
    assert "segments (5, 2 open)" in human.stdout and "PREDECESSORS" in human.stdout

    sealed = folio_cli("topic", "seal", "scale-cli")
    assert sealed.returncode == 0 and "sealed topic scale-cli" in sealed.stdout
    assert json.loads(folio_cli("topic", "describe", "scale-cli", "--json").stdout)["sealed"]
