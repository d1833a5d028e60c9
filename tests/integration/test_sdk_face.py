"""The SDK's face is consistent: one timeout rule, one position model (docs/sdk.md).

Against a real ``folio standalone``: a group reader's and a checkpoint's waits
are ``timeout=`` in seconds, the old ``timeout_ms``/``timeout_s`` spellings
still work with a ``DeprecationWarning`` naming ``timeout=``; and the position
after an event, a write or a group read is the same ``segment -> next offset``
that ``client.reader``, ``client.reader_group`` and batch reads start from.
"""

from __future__ import annotations

import pytest

import folio
from folio.read.cuts import StreamCut


def _write(client: folio.Client, topic: str, count: int) -> list[folio.WriteResult]:
    with client.writer(topic) as writer:
        futures = [writer.write_event(f"e{i}".encode()) for i in range(count)]
        writer.flush(timeout=30)
    return [future.result(timeout=0) for future in futures]


def test_group_waits_are_seconds_and_the_old_spellings_warn_but_work(
        client: folio.Client) -> None:
    client.create_topic("face-waits")
    _write(client, "face-waits", 3)
    group = client.reader_group("face-waits-g", ["face-waits"], start="earliest")
    with group.reader("r1") as reader:
        first = reader.read_next(timeout=30)
        assert first is not None and first.event is not None
        assert first.event.payload == b"e0"
        with pytest.warns(DeprecationWarning,
                          match=r"GroupReader\.read_next\(timeout_ms=\.\.\.\) is deprecated"
                                r".*pass timeout= in seconds"):
            second = reader.read_next(timeout_ms=30_000)
        assert second is not None and second.event is not None
        assert second.event.payload == b"e1"
        with pytest.warns(DeprecationWarning, match="timeout_ms"):
            third = reader.read_next(30_000)  # positional: still milliseconds, warned
        assert third is not None and third.event is not None
        assert third.event.payload == b"e2"
        with pytest.warns(DeprecationWarning), \
                pytest.raises(folio.InvalidArgumentError, match="not both"):
            reader.read_next(1000, timeout=1.0)
        assert reader.read_next(timeout=0.2) is None  # nothing more: None after the wait
        with pytest.warns(DeprecationWarning):
            assert reader.read_next(timeout_ms=200) is None

        with pytest.warns(DeprecationWarning,
                          match=r"ReaderGroup\.initiate_checkpoint\(timeout_s=\.\.\.\)"):
            future = group.initiate_checkpoint("cp", timeout_s=60)
        read = reader.read_next(timeout=30)
        assert read is not None and read.checkpoint_name == "cp"
        assert dict(future.result(timeout=60).positions) == {"face-waits/0": 3}
        second_future = group.initiate_checkpoint("cp2", timeout=60)
        read = reader.read_next(timeout=30)
        assert read is not None and read.checkpoint_name == "cp2"
        assert dict(second_future.result(timeout=60).positions) == {"face-waits/0": 3}


def test_positions_are_one_model_across_reads_groups_batches_and_writes(
        client: folio.Client) -> None:
    client.create_topic("face-positions")
    written = _write(client, "face-positions", 5)
    assert [(w.segment, w.offset) for w in written] == [("face-positions/0", i)
                                                          for i in range(5)]
    after_write = {written[1].segment: written[1].offset + 1}  # just after e1

    with client.reader("face-positions") as reader:
        events = [reader.read_next(timeout=30) for _ in range(2)]
        assert [e.payload for e in events if e is not None] == [b"e0", b"e1"]
        assert reader.positions == after_write

    group = client.reader_group("face-positions-g", ["face-positions"], start="earliest")
    with group.reader("r1") as member:
        reads = [member.read_next(timeout=30) for _ in range(2)]
        assert reads[1] is not None and reads[1].event is not None
        position = reads[1].position
        assert dict(position.positions) == after_write
        assert dict(member.position.positions) == after_write

    cut = StreamCut(position.positions)
    with client.reader("face-positions", start=cut) as reader:
        again = reader.read_next(timeout=30)
        assert again is not None and again.payload == b"e2"
    with client.reader("face-positions", start=dict(position.positions)) as reader:
        again = reader.read_next(timeout=30)
        assert again is not None and again.payload == b"e2"
    restarted = client.reader_group("face-positions-g2", ["face-positions"], start=cut)
    with restarted.reader("r1") as member:
        read = member.read_next(timeout=30)
        assert read is not None and read.event is not None and read.event.payload == b"e2"
    pieces = client.batch_client().segments("face-positions", from_cut=cut)
    assert [(p.name, p.start_offset, p.end_offset) for p in pieces] == [
        ("face-positions/0", 2, 5)]


def test_a_start_inside_a_sealed_segment_reads_its_successor_after_it(
        client: folio.Client) -> None:
    # 0 and 1 merged into 2; the start names 0 only: 0 from offset 1, then 2
    # whole; 1 lies outside the start (not read) and does not hold 2 back.
    client.create_topic("face-merged", 2)
    with client.writer("face-merged") as writer:
        before = [writer.write_event(f"b{i}".encode(), routing_key=f"k{i}") for i in range(20)]
        writer.flush(timeout=30)
    located = [future.result(timeout=0) for future in before]
    client.scale_topic("face-merged", ["face-merged/0", "face-merged/1"], [(0.0, 1.0)])
    with client.writer("face-merged") as writer:
        for i in range(5):
            writer.write_event(f"a{i}".encode(), routing_key=f"k{i}")
        writer.flush(timeout=30)
    in_zero = [w.offset for w in located if w.segment == "face-merged/0"]
    assert len(in_zero) >= 2

    with client.reader("face-merged", start={"face-merged/0": 1}) as reader:
        got: list[tuple[str, int]] = []
        while len(got) < len(in_zero) - 1 + 5:
            event = reader.read_next(timeout=30)
            assert event is not None, f"only {len(got)} events came"
            got.append((event.segment, event.offset))
        assert reader.read_next(timeout=0.3) is None
    assert got == [("face-merged/0", offset) for offset in sorted(in_zero)[1:]] + [
        ("face-merged/2", offset) for offset in range(5)]
    # A reader group started at the same mapping reads the same events in the same order.
    group = client.reader_group("face-merged-g", ["face-merged"], start={"face-merged/0": 1})
    with group.reader("r1") as member:
        in_group: list[tuple[str, int]] = []
        while len(in_group) < len(got):
            read = member.read_next(timeout=30)
            assert read is not None, f"only {len(in_group)} events came to the group"
            if read.event is not None:
                in_group.append((read.event.segment, read.event.offset))
    assert in_group == got


def test_a_group_started_at_a_partial_cut_reads_the_segments_it_leaves_out(
        client: folio.Client) -> None:
    client.create_topic("face-partial", 2)
    written = _write_keyed(client, "face-partial", 10)
    group = client.reader_group("face-partial-g", ["face-partial"],
                                start={"face-partial/0": 1})
    with group.reader("r1") as member:
        got: set[tuple[str, int]] = set()
        expected = {(w.segment, w.offset) for w in written
                    if w.segment != "face-partial/0" or w.offset >= 1}
        while len(got) < len(expected):
            read = member.read_next(timeout=30)
            assert read is not None, f"only {len(got)} of {len(expected)} events came"
            if read.event is not None:
                got.add((read.event.segment, read.event.offset))
    assert got == expected


def _write_keyed(client: folio.Client, topic: str, count: int) -> list[folio.WriteResult]:
    with client.writer(topic) as writer:
        futures = [writer.write_event(f"e{i}".encode(), routing_key=f"k{i}")
                   for i in range(count)]
        writer.flush(timeout=30)
    return [future.result(timeout=0) for future in futures]
