"""Where a reader group starts: segments a start cut leaves out, as ``Client.reader`` sees them."""

from __future__ import annotations

import pytest

from folio.errors import InvalidArgumentError
from folio.models import SegmentInfo, SegmentRange
from folio.read._group_start import initial_state
from folio.read.cuts import StreamCut


def _segment(number: int, start: int, end: int, *, sealed: bool = False,
             predecessors: tuple[int, ...] = (), successors: tuple[int, ...] = ()
             ) -> SegmentRange:
    return SegmentRange(name=f"t/{number}", number=number, key_low=0.0, key_high=1.0,
                        sealed=sealed, start_offset=start, end_offset=end,
                        predecessors=tuple(f"t/{n}" for n in predecessors),
                        successors=tuple(f"t/{n}" for n in successors))


class _Catalog:
    """The topic ``t``'s segment graph, as the admin calls answer it."""

    def __init__(self, every: list[SegmentRange]) -> None:
        self.every = every

    def get_segments(self, topic: str, *, include_sealed: bool = False) -> list[SegmentRange]:
        assert topic == "t"
        return [s for s in self.every if include_sealed or not s.sealed]

    def get_segment_info(self, segment: str) -> SegmentInfo:
        raise AssertionError("not used")

    def get_successors(self, segment: str) -> list[SegmentRange]:
        raise AssertionError("not used")


def test_active_segments_a_cut_leaves_out_start_at_their_first_event() -> None:
    catalog = _Catalog([_segment(0, 0, 10), _segment(1, 4, 20)])
    state = initial_state(catalog, "g", ["t"], {"t/0": 3})
    assert state.unassigned == {"t/0": 3, "t/1": 4}
    assert state.finished == set()


def test_a_cut_covering_the_key_space_is_taken_as_it_is() -> None:
    # 0 split into 1 and 2: a cut at 1 and 2 (a checkpoint's, say) adds nothing.
    catalog = _Catalog([_segment(0, 0, 10, sealed=True, successors=(1, 2)),
                        _segment(1, 0, 5, predecessors=(0,)),
                        _segment(2, 0, 6, predecessors=(0,))])
    state = initial_state(catalog, "g", ["t"], StreamCut({"t/1": 2, "t/2": 3}))
    assert state.unassigned == {"t/1": 2, "t/2": 3}


def test_the_successor_of_a_named_sealed_segment_waits_for_it_not_for_the_left_out() -> None:
    # 0 and 1 merged into 2; the cut names 0: 2 follows 0, and 1 (outside the
    # cut) counts as finished so that 2 does not wait for it forever.
    catalog = _Catalog([_segment(0, 0, 10, sealed=True, successors=(2,)),
                        _segment(1, 0, 8, sealed=True, successors=(2,)),
                        _segment(2, 0, 5, predecessors=(0, 1))])
    state = initial_state(catalog, "g", ["t"], {"t/0": 4})
    assert state.unassigned == {"t/0": 4}
    assert state.finished == {"t/1"}


def test_a_cut_naming_unknown_segments_is_refused() -> None:
    catalog = _Catalog([_segment(0, 0, 10)])
    with pytest.raises(InvalidArgumentError, match="does not have"):
        initial_state(catalog, "g", ["t"], {"t/9": 0})
