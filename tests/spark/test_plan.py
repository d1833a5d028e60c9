"""Planning without Spark or a broker: cuts to slices, a stream's next offsets, options."""

from __future__ import annotations

import pytest

from folio.errors import InvalidArgumentError
from folio.models import SegmentRange
from folio.spark._options import ReadOptions, WriteOptions
from folio.spark._plan import Slice, batch_slices, initial_offsets, next_offsets, stream_slices


def _seg(number: int, start: int, end: int, *, sealed: bool = False,
         predecessors: tuple[str, ...] = ()) -> SegmentRange:
    return SegmentRange(f"t/{number}", number, 0.0, 1.0, sealed, start, end,
                        predecessors=predecessors)


# t/0 was split into t/1 and t/2; t/3 is untouched.
SCALED = [_seg(0, 0, 10, sealed=True), _seg(1, 0, 5, predecessors=("t/0",)),
          _seg(2, 0, 7, predecessors=("t/0",)), _seg(3, 2, 4)]


def test_batch_slices_cover_every_segment_and_split_long_ranges() -> None:
    assert batch_slices(SCALED, "earliest", "latest", 4) == [
        Slice("t/0", 0, 4), Slice("t/0", 4, 8), Slice("t/0", 8, 10),
        Slice("t/1", 0, 4), Slice("t/1", 4, 5),
        Slice("t/2", 0, 4), Slice("t/2", 4, 7),
        Slice("t/3", 2, 4)]
    assert batch_slices(SCALED, {"t/0": 9}, {"t/2": 1, "t/3": 3}, 100) == [
        Slice("t/0", 9, 10), Slice("t/1", 0, 5), Slice("t/2", 0, 1), Slice("t/3", 2, 3)]
    assert batch_slices(SCALED, "latest", "latest", 100) == []


@pytest.mark.parametrize(("starting", "ending", "message"), [
    ({"t/9": 0}, "latest", "unknown segment 't/9'"),
    ({"t/3": 1}, "latest", "offset 1 of 't/3' is outside its readable range [2, 4]"),
    ({"t/1": 4}, {"t/1": 2}, "endingPositions is before startingPositions"),
])
def test_batch_slices_refuse_bad_cuts(starting: object, ending: object, message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message.replace("[", r"\[")):
        batch_slices(SCALED, starting, ending, 10)  # type: ignore[arg-type]


def test_initial_offsets() -> None:
    assert initial_offsets(SCALED, "earliest") == {"t/0": 0, "t/1": 0, "t/2": 0, "t/3": 2}
    assert initial_offsets(SCALED, "latest") == {"t/1": 5, "t/2": 7, "t/3": 4}
    assert initial_offsets(SCALED, {"t/2": 3}) == {"t/1": 0, "t/2": 3, "t/3": 2}


def test_successors_wait_until_their_predecessor_is_read_to_its_end() -> None:
    start = {"t/0": 0, "t/3": 2}
    first = next_offsets(SCALED, start)
    # t/0 is read to its end; its successors join at their start but are not read yet.
    assert first == {"t/0": 10, "t/1": 0, "t/2": 0, "t/3": 4}
    second = next_offsets(SCALED, first)
    assert second == {"t/0": 10, "t/1": 5, "t/2": 7, "t/3": 4}
    assert next_offsets(SCALED, second) == second  # nothing new


def test_a_predecessor_the_query_never_tracked_counts_as_finished() -> None:
    assert next_offsets(SCALED, {"t/1": 1}) == {"t/1": 5}


def test_read_limit_is_shared_fairly_and_always_progresses() -> None:
    segments = [_seg(0, 0, 100), _seg(1, 0, 3), _seg(2, 0, 100)]
    start = {"t/0": 0, "t/1": 0, "t/2": 0}
    assert next_offsets(segments, start, max_events=30) == {"t/0": 13, "t/1": 3, "t/2": 14}
    assert sum(next_offsets(segments, start, max_events=2).values()) == 2
    assert next_offsets(segments, start, max_events=1000) == {"t/0": 100, "t/1": 3, "t/2": 100}


def test_available_now_target_caps_every_segment() -> None:
    segments = [_seg(0, 0, 100), _seg(1, 0, 50)]
    start = {"t/0": 0, "t/1": 0}
    assert next_offsets(segments, start, target={"t/0": 60}) == {"t/0": 60, "t/1": 0}


def test_stream_slices_skip_empty_ranges_and_new_segments() -> None:
    assert stream_slices({"t/0": 2, "t/1": 5}, {"t/0": 9, "t/1": 5, "t/2": 0}, 4) == [
        Slice("t/0", 2, 6), Slice("t/0", 6, 9)]


def test_options_arrive_lower_cased_as_strings() -> None:
    options = ReadOptions.parse({"topic": "t", "endpoint": "h:1",
                                 "startingpositions": '{"t/0": 3}',
                                 "maxeventspertrigger": "10", "isolation": "read_uncommitted"})
    assert options.starting == {"t/0": 3}
    assert options.ending == "latest"
    assert options.max_events_per_trigger == 10
    assert options.isolation == "read_uncommitted"
    assert WriteOptions.parse({"topic": "t", "flushevents": "5"}).flush_events == 5


@pytest.mark.parametrize(("options", "message"), [
    ({}, "option 'topic' is required"),
    ({"topic": "t", "isolation": "dirty"}, "option 'isolation' must be"),
    ({"topic": "t", "startingpositions": "soon"}, "option 'startingPositions' must be"),
    ({"topic": "t", "startingpositions": '{"u/0": 1}'}, "not a segment of topic 't'"),
    ({"topic": "t", "maxeventspertrigger": "0"}, "option 'maxEventsPerTrigger' must be > 0"),
    ({"topic": "t", "maxeventsperpartition": "x"}, "must be an integer"),
])
def test_bad_options_are_named(options: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        ReadOptions.parse(options)
