"""Batch reads: every segment (sealed ones after scaling too) between cuts, in any order."""

from __future__ import annotations

from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest

import folio
from folio.read.cuts import StreamCut


def test_batch_reads_every_segment_across_scaling_in_parallel(client: folio.Client) -> None:
    client.create_topic("bt-scale", 2)
    written: list[bytes] = []
    with client.writer("bt-scale") as writer:
        for round_ in range(3):
            batch = [f"{round_}:{i}".encode() for i in range(200)]
            for i, payload in enumerate(batch):
                writer.write_event(payload, routing_key=f"k{i % 37}")
            writer.flush()
            written += batch
            active = client.get_segments("bt-scale")
            if round_ == 0:  # split the first segment
                low, high = active[0].key_low, active[0].key_high
                client.scale_topic("bt-scale", [active[0].name],
                                   [(low, (low + high) / 2), ((low + high) / 2, high)])
            elif round_ == 1:  # merge the two last ones
                client.scale_topic("bt-scale", [active[-2].name, active[-1].name],
                                   [(active[-2].key_low, active[-1].key_high)])
    batch_client = client.batch_client()
    slices = batch_client.segments("bt-scale")
    assert any(s.segment.sealed for s in slices)
    assert sum(s.length for s in slices) == len(written)
    with ThreadPoolExecutor(4) as pool:
        parts = list(pool.map(lambda s: [e.payload for e in batch_client.read_segment(s)],
                              reversed(slices)))
    assert Counter(p for part in parts for p in part) == Counter(written)
    # From a cut: the open segments at their ends now -> nothing before them.
    latest = StreamCut({s.name: s.end_offset for s in client.get_segments("bt-scale")})
    assert batch_client.segments("bt-scale", from_cut=latest) == []
    # To a cut of the first segments at offset 10: only those 10 events each.
    first = StreamCut({"bt-scale/0": 10, "bt-scale/1": 10})
    limited = batch_client.segments("bt-scale", to_cut=first)
    assert [(s.name, s.start_offset, s.end_offset) for s in limited] == [
        ("bt-scale/0", 0, 10), ("bt-scale/1", 0, 10)]
    assert len(list(batch_client.read_segment("bt-scale/1", 5, 8))) == 3
    with pytest.raises(folio.InvalidArgumentError):
        batch_client.segments("bt-scale", from_cut=StreamCut({"other/0": 0}))
    assert StreamCut.from_bytes(first.to_bytes()) == first == StreamCut.from_json(first.to_json())


def test_read_committed_range_ending_in_aborted_events_ends(client: folio.Client) -> None:
    """The range's last events are an aborted transaction's: the iterator still ends."""
    client.create_topic("bt-aborted", 1)
    with client.writer("bt-aborted") as writer:
        writer.write_event(b"kept", routing_key="k")
        writer.flush()
    with client.transactional_writer("bt-aborted") as txns:
        txn = txns.begin()
        for n in range(5):
            txn.write_event(f"gone-{n}".encode(), routing_key="k")
        txn.flush()
        txn.abort()
    batch_client = client.batch_client()
    (only,) = batch_client.segments("bt-aborted")
    assert (only.start_offset, only.end_offset) == (0, 6)
    with ThreadPoolExecutor(1) as pool:  # bounded: a hang fails, it does not stall the run
        read = pool.submit(lambda: [e.payload for e in batch_client.read_segment(only)])
        assert read.result(timeout=60) == [b"kept"]
        uncommitted = pool.submit(lambda: len(list(batch_client.read_segment(
            only, isolation="read_uncommitted"))))
        assert uncommitted.result(timeout=60) == 6
