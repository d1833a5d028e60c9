"""Reader groups as consumer groups, against a real ``folio standalone``.

A joining member gets its share at the holders' next sync (no checkpoint);
an id held by a live member is refused with the time left; session timeouts
are validated; heartbeats report positions that ``reader_offline`` and
``describe`` use; reset and delete are refused while members are online, and
the ``folio group`` commands show and change all this.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from typing import Any

import pytest

import folio
from folio.read.groups import GroupReader
from tests.support.bookies import BookieProcess, run_folio
from tests.support.wait import wait_for


def _write(client: folio.Client, topic: str, count: int) -> list[bytes]:
    payloads = [f"k{n % 24}:{n}".encode() for n in range(count)]
    with client.writer(topic) as writer:
        for n, payload in enumerate(payloads):
            writer.write_event(payload, routing_key=f"k{n % 24}")
        writer.flush()
    return payloads


def _read_in_threads(readers: list[GroupReader[Any]], got: list[bytes],
                     stop: threading.Event) -> list[threading.Thread]:
    lock = threading.Lock()

    def run(reader: GroupReader[Any]) -> None:
        while not stop.is_set():
            read = reader.read_next(timeout=0.05)
            if read is not None and read.event is not None:
                with lock:
                    got.append(read.event.payload)

    threads = [threading.Thread(target=run, args=(r,), daemon=True) for r in readers]
    for thread in threads:
        thread.start()
    return threads


def test_a_joining_member_gets_its_share_without_a_checkpoint(client: folio.Client) -> None:
    client.create_topic("lv-join", 6)
    written = _write(client, "lv-join", 1200)
    group = client.reader_group("g-lv-join", ["lv-join"], sync_interval_ms=50)
    first = group.reader("first")
    got: list[bytes] = []
    while len(got) < 200:
        read = first.read_next(timeout=1)
        if read is not None and read.event is not None:
            got.append(read.event.payload)
    assert len(first.segments) == 6
    second = group.reader("second")
    stop = threading.Event()
    threads = _read_in_threads([first, second], got, stop)
    try:
        wait_for(lambda: len(second.segments) == 3 and len(first.segments) == 3,
                 "the second member holds half", 60)
        wait_for(lambda: len(got) >= len(written), "every event read", 60)
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
    assert group.checkpoints() == []  # no checkpoint was needed
    # Handed over at the holder's position: nothing lost, nothing read twice.
    assert Counter(got) == Counter(written)
    first.close()
    second.close()


def test_an_id_held_by_a_member_is_refused_with_the_time_left(client: folio.Client) -> None:
    client.create_topic("lv-id", 1)
    group = client.reader_group("g-lv-id", ["lv-id"], session_timeout_ms=5000)
    with group.reader("same"):
        with pytest.raises(folio.ReaderIdInUseError, match="declares it offline") as refused:
            group.reader("same")
        assert refused.value.session_timeout_ms == 5000
        assert refused.value.silent_ms is not None and refused.value.silent_ms >= 0
        assert isinstance(refused.value, folio.InvalidArgumentError)
    with group.reader("same") as again:  # closed: the id is free at once
        assert again.reader_id == "same"


def test_session_timeouts_are_validated_and_kept(client: folio.Client) -> None:
    client.create_topic("lv-timeout", 1)
    for bad in (500, 1_800_001):
        with pytest.raises(folio.InvalidArgumentError, match="session_timeout_ms"):
            client.reader_group(f"g-lv-bad-{bad}", ["lv-timeout"], session_timeout_ms=bad)
    with pytest.raises(folio.InvalidArgumentError, match="positive int"):
        client.reader_group("g-lv-bad", ["lv-timeout"], session_timeout_ms=0)
    group = client.reader_group("g-lv-timeout", ["lv-timeout"], session_timeout_ms=3000)
    assert group.session_timeout_ms == 3000
    assert client.reader_group("g-lv-timeout", ["lv-timeout"]).session_timeout_ms == 3000
    with pytest.raises(folio.InvalidArgumentError, match="exists with session_timeout_ms"):
        client.reader_group("g-lv-timeout", ["lv-timeout"], session_timeout_ms=4000)
    assert client.reader_group("g-lv-default", ["lv-timeout"]).session_timeout_ms == 10_000


def test_reader_offline_uses_the_reported_position(client: folio.Client) -> None:
    client.create_topic("lv-off", 1)
    _write(client, "lv-off", 50)
    group = client.reader_group("g-lv-off", ["lv-off"], session_timeout_ms=3000)
    reader = group.reader("r")
    count = 0

    def reported_all() -> bool:
        nonlocal count
        read = reader.read_next(timeout=0.02)  # each call acknowledges what came before
        count += read is not None and read.event is not None
        [member] = group.describe().members
        return count == 50 and [s.position for s in member.segments] == [50]

    wait_for(reported_all, "a heartbeat reporting all 50 events processed", 30)
    group.reader_offline("r")
    assert group.assignment() == {"": ["lv-off/0"]}
    assert [(s.position, s.lag) for s in group.describe().unassigned] == [(50, 0)]
    with pytest.raises(folio.ReaderNotInGroupError):
        while True:
            reader.read_next(timeout=0.05)
    reader.close()


def test_reset_is_refused_while_members_are_online(client: folio.Client) -> None:
    client.create_topic("lv-reset", 2)
    _write(client, "lv-reset", 10)
    group = client.reader_group("g-lv-reset", ["lv-reset"])
    reader = group.reader("busy")
    with pytest.raises(folio.ReaderGroupNotEmptyError, match="busy") as refused:
        group.reset("latest", only_if_empty=True)
    assert refused.value.members == ["busy"]
    reader.close()
    group.reset("latest", only_if_empty=True)
    assert sum(s.position for s in group.describe().unassigned) == 10


def test_folio_group_commands(server: BookieProcess, client: folio.Client) -> None:
    client.create_topic("lv-cli", 2)
    _write(client, "lv-cli", 40)
    group = client.reader_group("g-lv-cli", ["lv-cli"])
    member = group.reader("m")
    ep = ("--endpoint", server.address)

    listed = run_folio("group", "list", "--json", *ep)
    assert listed.returncode == 0, listed.stderr
    [row] = [g for g in json.loads(listed.stdout) if g["name"] == "g-lv-cli"]
    assert row == {"name": "g-lv-cli", "kind": "reader", "state": None, "topics": ["lv-cli"],
                   "members": 1, "lag": 40}
    table = run_folio("group", "list", *ep)
    assert table.returncode == 0 and "g-lv-cli" in table.stdout

    wait_for(lambda: member.read_next(timeout=0.05) is None and len(member.segments) == 2,
             "the member read its segments", 30)
    described = run_folio("group", "describe", "g-lv-cli", "--json", *ep)
    assert described.returncode == 0, described.stderr
    shown = json.loads(described.stdout)
    assert shown["session_timeout_ms"] == 10_000
    [m] = shown["members"]
    assert m["reader_id"] == "m" and m["silent_ms"] >= 0
    assert {s["segment"] for s in m["segments"]} == {"lv-cli/0", "lv-cli/1"}
    for segment in m["segments"]:
        assert segment["lag"] == segment["end_offset"] - segment["position"]
    text = run_folio("group", "describe", "g-lv-cli", *ep)
    assert text.returncode == 0 and "lv-cli/0" in text.stdout and "m" in text.stdout

    refused = run_folio("group", "reset", "g-lv-cli", "--to", "earliest", *ep)
    assert refused.returncode == 1
    assert "folio group reset: error:" in refused.stderr and "members online: m" in \
        refused.stderr
    refused = run_folio("group", "delete", "g-lv-cli", *ep)
    assert refused.returncode == 1 and "members online" in refused.stderr

    offline = run_folio("group", "offline", "g-lv-cli", "m", *ep)
    assert offline.returncode == 0, offline.stderr
    assert group.online_readers() == []
    again = run_folio("group", "offline", "g-lv-cli", "m", *ep)
    assert again.returncode == 1 and "not a member" in again.stderr

    no_checkpoint = run_folio("group", "reset", "g-lv-cli", "--to", "checkpoint", *ep)
    assert no_checkpoint.returncode == 1 and "no completed checkpoint" in no_checkpoint.stderr
    reset = run_folio("group", "reset", "g-lv-cli", "--to", "earliest", *ep)
    assert reset.returncode == 0, reset.stderr
    assert sum(s.lag or 0 for s in group.describe().unassigned) == 40
    missing = run_folio("group", "describe", "nope", *ep)
    assert missing.returncode == 1 and "does not exist" in missing.stderr

    deleted = run_folio("group", "delete", "g-lv-cli", *ep)
    assert deleted.returncode == 0, deleted.stderr
    assert "g-lv-cli" not in client.list_reader_groups()
    member.close()
