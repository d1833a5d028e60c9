"""Where a reader starts: ``start`` as segment offsets, and the ancestors read before."""

from __future__ import annotations

import pytest

from folio.errors import InvalidArgumentError
from folio.models import SegmentRange
from folio.read.cuts import Checkpoint, StreamCut
from folio.read.start import ancestors, start_positions


def _segment(name: str, start: int, end: int, *, sealed: bool = False,
             predecessors: tuple[str, ...] = (), successors: tuple[str, ...] = ()
             ) -> SegmentRange:
    return SegmentRange(name=name, number=int(name.split("/")[1]), key_low=0.0, key_high=1.0,
                        sealed=sealed, start_offset=start, end_offset=end,
                        predecessors=predecessors, successors=successors)


EVERY = [_segment("t/0", 5, 10, sealed=True, successors=("t/1", "t/2")),
         _segment("t/1", 0, 7, predecessors=("t/0",)),
         _segment("t/2", 2, 9, predecessors=("t/0",))]


def test_earliest_is_the_first_segments_from_their_first_event() -> None:
    assert start_positions("t", EVERY, "earliest") == {"t/0": 5}


def test_latest_is_the_end_of_every_active_segment() -> None:
    assert start_positions("t", EVERY, "latest") == {"t/1": 7, "t/2": 9}


def test_a_mapping_overrides_and_the_rest_start_at_their_earliest() -> None:
    assert start_positions("t", EVERY, {"t/1": 3}) == {"t/1": 3, "t/2": 2}


def test_a_stream_cut_or_checkpoint_starts_at_its_offsets_of_the_topic() -> None:
    cut = StreamCut({"t/1": 3, "t/2": 4, "u/0": 9})
    assert start_positions("t", EVERY, cut) == {"t/1": 3, "t/2": 4}
    checkpoint = Checkpoint("g", "cp", {"t/1": 3}, topics=("t",))
    assert start_positions("t", EVERY, checkpoint) == {"t/1": 3, "t/2": 2}
    with pytest.raises(InvalidArgumentError, match="the cut names no segment of topic 't'"):
        start_positions("t", EVERY, StreamCut({"u/0": 1}))


def test_successors_of_a_named_sealed_segment_wait_for_it() -> None:
    # t/0 split into t/1 and t/2: starting inside t/0, its successors follow it
    # (not started now), so per key the events stay in write order.
    assert start_positions("t", EVERY, {"t/0": 7}) == {"t/0": 7}


def test_an_unnamed_co_predecessor_of_a_waiting_successor_starts_at_its_end() -> None:
    # t/0 and t/1 merged into t/2; the mapping names t/0 only: t/2 waits for
    # t/0, and t/1 (outside the start) is finished at once instead of read.
    merged = [_segment("t/0", 0, 10, sealed=True, successors=("t/2",)),
              _segment("t/1", 0, 8, sealed=True, successors=("t/2",)),
              _segment("t/2", 0, 5, predecessors=("t/0", "t/1"))]
    assert start_positions("t", merged, {"t/0": 4}) == {"t/0": 4, "t/1": 8}


@pytest.mark.parametrize(("start", "message"), [
    ({"u/1": 0}, "segment 'u/1' is not a segment of topic 't'"),
    ({"t/1": -1}, "offset -1 of 't/1' is negative"),
    ("middle", "start must be 'earliest', 'latest', a StreamCut, a Checkpoint or a mapping"),
])
def test_a_bad_start_is_refused_with_why(start: object, message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        start_positions("t", EVERY, start)  # type: ignore[arg-type]


def test_ancestors_are_transitive() -> None:
    chain = [_segment("t/0", 0, 1, sealed=True), _segment("t/1", 0, 1, sealed=True,
                                                          predecessors=("t/0",)),
             _segment("t/2", 0, 1, predecessors=("t/1",))]
    assert ancestors(chain, ["t/2"]) == {"t/0", "t/1"}
    assert ancestors(chain, ["t/0"]) == set()
