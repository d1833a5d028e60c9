"""A payload the serializer cannot decode: a typed error on that event, nothing skipped.

The scenario of issue 22: one segment holding 100 JSON events, ``b"not json"``
and 100 more, written in one flush so that the bad payload shares a Read
response with good events on both sides (the response the reader used to drop,
losing the 200 good events around the bad one). Each reader kind — the event
reader, a reader group member, a batch range — is read against a real
standalone broker with each policy: ``raise`` (the default: the reader stays
on the event until the application skips it), ``skip`` and ``raw``; and a
position or checkpoint taken right after the error resumes at the bad event.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

import folio
from tests.support.wait import wait_for

BAD = b"not json"
BAD_OFFSET = 100
#: Offsets of the good events: 0-99 and 101-200.
GOOD = [*range(BAD_OFFSET), *range(BAD_OFFSET + 1, 2 * BAD_OFFSET + 1)]


def _write_scenario(client: folio.Client, topic: str) -> str:
    """100 JSON events, ``b"not json"``, 100 more, one flush; returns the segment."""
    client.create_topic(topic, 1)
    with client.writer(topic) as writer:
        for i in range(BAD_OFFSET):
            writer.write_event(json.dumps({"n": i}).encode())
        writer.write_event(BAD)
        for i in range(BAD_OFFSET, 2 * BAD_OFFSET):
            writer.write_event(json.dumps({"n": i}).encode())
        writer.flush()
    (segment,) = client.get_segments(topic)
    assert segment.end_offset == 2 * BAD_OFFSET + 1
    return segment.name


def _write_sentinel(client: folio.Client, topic: str) -> None:
    """One more event (offset 201): reading it proves the reader read past everything."""
    with client.writer(topic) as writer:
        writer.write_event(json.dumps("end").encode())
        writer.flush()


def _read(reader: folio.EventReader[Any], count: int) -> list[folio.Event[Any]]:
    events: list[folio.Event[Any]] = []
    for _ in range(count):
        event = reader.read_next(timeout=30)
        assert event is not None, f"only {len(events)} of {count} events came"
        events.append(event)
    return events


def _check_error(error: folio.DeserializationError, topic: str, segment: str) -> None:
    assert isinstance(error, folio.FolioError) and not error.retriable
    assert (error.topic, error.segment, error.offset) == (topic, segment, BAD_OFFSET)
    assert error.payload == BAD
    assert isinstance(error.cause, json.JSONDecodeError)
    assert error.__cause__ is error.cause
    assert f"segment {segment} offset {BAD_OFFSET}" in str(error)
    assert error.context == {"topic": topic, "segment": segment, "offset": BAD_OFFSET}


def test_reader_raises_stays_on_the_event_and_skips_exactly_it(client: folio.Client) -> None:
    segment = _write_scenario(client, "ud-raise")
    with client.reader("ud-raise", serializer=folio.JsonSerializer()) as reader:
        assert [e.payload["n"] for e in _read(reader, BAD_OFFSET)] == list(range(BAD_OFFSET))
        with pytest.raises(folio.DeserializationError) as first:
            reader.read_next(timeout=30)
        _check_error(first.value, "ud-raise", segment)
        # Still on it: the position names it, and reading again raises again.
        assert reader.positions == {segment: BAD_OFFSET}
        with pytest.raises(folio.DeserializationError) as again:
            reader.read_next(timeout=30)
        assert again.value.offset == BAD_OFFSET
        assert reader.positions == {segment: BAD_OFFSET}
        # A reader started at that position (a restart after the error) is on it too.
        with client.reader("ud-raise", dict(reader.positions),
                           folio.JsonSerializer()) as restarted:
            with pytest.raises(folio.DeserializationError) as there:
                restarted.read_next(timeout=30)
            assert there.value.offset == BAD_OFFSET
        reader.skip(first.value)
        assert reader.positions == {segment: BAD_OFFSET + 1}
        with pytest.raises(folio.InvalidArgumentError, match="not on the event"):
            reader.skip(first.value)  # exactly one event: skipped already
        rest = _read(reader, BAD_OFFSET)
        assert [e.offset for e in rest] == GOOD[BAD_OFFSET:]
        assert [e.payload["n"] for e in rest] == list(range(BAD_OFFSET, 2 * BAD_OFFSET))
        _write_sentinel(client, "ud-raise")
        end = reader.read_next(timeout=30)
        assert end is not None and (end.offset, end.payload) == (2 * BAD_OFFSET + 1, "end")


def test_reader_skip_policy_logs_and_loses_nothing_else(
        client: folio.Client, caplog: pytest.LogCaptureFixture) -> None:
    segment = _write_scenario(client, "ud-skip")
    _write_sentinel(client, "ud-skip")
    caplog.set_level(logging.WARNING, logger="folio._transport.segment_streams")
    with client.reader("ud-skip", serializer=folio.JsonSerializer(),
                       on_deserialization_error="skip") as reader:
        events = _read(reader, len(GOOD) + 1)
    assert [e.offset for e in events] == [*GOOD, 2 * BAD_OFFSET + 1]
    assert [e.payload for e in events[:-1]] == [{"n": i} for i in range(2 * BAD_OFFSET)]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and f"segment {segment} offset {BAD_OFFSET}" in warnings[0]


def test_reader_raw_policy_hands_over_the_bytes_flagged(client: folio.Client) -> None:
    segment = _write_scenario(client, "ud-raw")
    with client.reader("ud-raw", serializer=folio.JsonSerializer(),
                       on_deserialization_error="raw") as reader:
        events = _read(reader, 2 * BAD_OFFSET + 1)
    assert [e.offset for e in events] == list(range(2 * BAD_OFFSET + 1))
    raw = [e for e in events if isinstance(e, folio.UndecodedEvent)]
    assert len(raw) == 1 and raw[0] is events[BAD_OFFSET]
    assert raw[0].payload == BAD and raw[0].segment == segment
    _check_error(raw[0].error, "ud-raw", segment)
    assert [e.payload["n"] for e in events if e is not raw[0]] == list(range(2 * BAD_OFFSET))


def test_a_bad_policy_is_refused(client: folio.Client) -> None:
    client.create_topic("ud-bad-policy", 1)
    with pytest.raises(folio.InvalidArgumentError, match="on_deserialization_error"):
        client.reader("ud-bad-policy",  # type: ignore[call-overload]
                      on_deserialization_error="ignore")
    with pytest.raises(folio.InvalidArgumentError, match="on_deserialization_error"):
        client.batch_client().read_segment("ud-bad-policy/0", 0, 1,
                                           on_deserialization_error="drop")  # type: ignore[arg-type]


def _group_read(reader: folio.GroupReader[Any], count: int) -> list[folio.Event[Any]]:
    events: list[folio.Event[Any]] = []
    while len(events) < count:
        read = reader.read_next(timeout=30)
        assert read is not None, f"only {len(events)} of {count} events came"
        if read.event is not None:
            events.append(read.event)
    return events


def test_group_member_stays_on_the_event_and_its_checkpoint_names_it(
        client: folio.Client) -> None:
    segment = _write_scenario(client, "ud-group")
    group = client.reader_group("ud-g", ["ud-group"], sync_interval_ms=50,
                                session_timeout_ms=6000)
    member = group.reader("a", folio.JsonSerializer())
    assert [e.offset for e in _group_read(member, BAD_OFFSET)] == GOOD[:BAD_OFFSET]
    with pytest.raises(folio.DeserializationError) as caught:
        member.read_next(timeout=30)
    _check_error(caught.value, "ud-group", segment)
    assert member.position.positions == {segment: BAD_OFFSET}
    # The member passes a checkpoint while it stays on the event: the
    # checkpoint records the bad event's offset, not one past it.
    future = group.initiate_checkpoint("stuck", timeout=60)
    while not future.done():
        try:
            read = member.read_next(timeout=1)
        except folio.DeserializationError as error:
            assert error.offset == BAD_OFFSET
            continue
        assert read is None or read.checkpoint_name == "stuck"
    checkpoint = future.result()
    assert checkpoint.positions == {segment: BAD_OFFSET}
    # Its heartbeats report the bad event's offset too: handed over without a
    # position (as if it died), the segment is read again from that event.
    wait_for(lambda: [s.position for m in group.describe().members for s in m.segments]
             == [BAD_OFFSET], "the member's reported position is the bad event's offset")
    with pytest.raises(folio.DeserializationError):
        member.read_next(timeout=30)  # still there after all of that
    group.reader_offline("a")
    member.close()
    heir = group.reader("b", folio.JsonSerializer(), on_deserialization_error="raw")
    taken = _group_read(heir, BAD_OFFSET + 1)
    assert isinstance(taken[0], folio.UndecodedEvent) and taken[0].offset == BAD_OFFSET
    assert [e.offset for e in taken[1:]] == GOOD[BAD_OFFSET:]
    heir.close()
    # A new group from the checkpoint starts at the bad event; this member skips it.
    fresh = client.reader_group("ud-g2", ["ud-group"], start=checkpoint, sync_interval_ms=50)
    replay = fresh.reader("c", folio.JsonSerializer())
    with pytest.raises(folio.DeserializationError) as there:
        replay.read_next(timeout=30)
    assert there.value.offset == BAD_OFFSET
    replay.skip(there.value)
    assert [e.offset for e in _group_read(replay, BAD_OFFSET)] == GOOD[BAD_OFFSET:]
    assert replay.position.positions == {segment: 2 * BAD_OFFSET + 1}
    replay.close()


def test_group_member_skip_policy(client: folio.Client) -> None:
    _write_scenario(client, "ud-group-skip")
    group = client.reader_group("ud-gs", ["ud-group-skip"], sync_interval_ms=50)
    member = group.reader("a", folio.JsonSerializer(), on_deserialization_error="skip")
    assert [e.offset for e in _group_read(member, len(GOOD))] == GOOD
    member.close()


def test_batch_range_raises_stays_and_skips(client: folio.Client) -> None:
    segment = _write_scenario(client, "ud-batch")
    batch = client.batch_client()
    (piece,) = batch.segments("ud-batch")
    events = batch.read_segment(piece, serializer=folio.JsonSerializer())
    got = [next(events) for _ in range(BAD_OFFSET)]
    assert [e.offset for e in got] == GOOD[:BAD_OFFSET]
    with pytest.raises(folio.DeserializationError) as caught:
        next(events)
    _check_error(caught.value, "ud-batch", segment)
    assert events.position == BAD_OFFSET
    with pytest.raises(folio.DeserializationError):
        next(events)
    # A range started at the position (another process, say) meets it too.
    with pytest.raises(folio.DeserializationError):
        next(batch.read_segment(segment, events.position, serializer=folio.JsonSerializer()))
    events.skip(caught.value)
    got += list(events)
    assert [e.offset for e in got] == GOOD
    assert events.position == 2 * BAD_OFFSET + 1


@pytest.mark.parametrize("policy", ["skip", "raw"])
def test_batch_range_policies(client: folio.Client, policy: folio.DeserializationPolicy) -> None:
    topic = f"ud-batch-{policy}"
    _write_scenario(client, topic)
    batch = client.batch_client()
    (piece,) = batch.segments(topic)
    events = list(batch.read_segment(piece, serializer=folio.JsonSerializer(),
                                     on_deserialization_error=policy))
    if policy == "skip":
        assert [e.offset for e in events] == GOOD
    else:
        assert [e.offset for e in events] == list(range(2 * BAD_OFFSET + 1))
        assert isinstance(events[BAD_OFFSET], folio.UndecodedEvent)
        assert events[BAD_OFFSET].payload == BAD
    # A range that ends before the bad event never meets it.
    assert len(list(batch.read_segment(piece.name, 0, BAD_OFFSET,
                                       serializer=folio.JsonSerializer()))) == BAD_OFFSET
