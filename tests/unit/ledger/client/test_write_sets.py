"""Round-robin striping: hand-computed cases, then every small shape against its definition."""

from __future__ import annotations

from itertools import combinations

import pytest

from ledger.client.write_sets import ensemble_span, entries_for_position, is_quorum_acked, write_set

LAST_ENTRY_ID = (1 << 63) - 1


def small_shapes() -> list[tuple[int, int]]:
    """Every (E, Qw) with 1 <= Qw <= E <= 6."""
    return [(e, w) for e in range(1, 7) for w in range(1, e + 1)]


# -------------------------------------------------------------------- write_set


@pytest.mark.parametrize(
    ("entry_id", "ensemble_size", "write_quorum", "expected"),
    [
        (0, 3, 2, [0, 1]),
        (1, 3, 2, [1, 2]),
        (2, 3, 2, [2, 0]),
        (3, 3, 2, [0, 1]),
        (5, 3, 2, [2, 0]),
        (0, 3, 3, [0, 1, 2]),
        (1, 3, 3, [1, 2, 0]),
        (2, 3, 3, [2, 0, 1]),
        (4, 5, 3, [4, 0, 1]),
        (7, 1, 1, [0]),
        (1_000_001, 4, 2, [1, 2]),
    ],
)
def test_write_set_hand_computed(entry_id: int, ensemble_size: int, write_quorum: int,
                                 expected: list[int]) -> None:
    assert write_set(entry_id, ensemble_size, write_quorum) == expected


@pytest.mark.parametrize(("ensemble_size", "write_quorum"), small_shapes())
def test_write_set_is_write_quorum_distinct_positions(ensemble_size: int,
                                                      write_quorum: int) -> None:
    for entry_id in range(3 * ensemble_size):
        positions = write_set(entry_id, ensemble_size, write_quorum)
        assert len(positions) == len(set(positions)) == write_quorum
        assert positions[0] == entry_id % ensemble_size
        assert all(0 <= position < ensemble_size for position in positions)


# --------------------------------------------------------- entries_for_position


@pytest.mark.parametrize(
    ("position", "first_entry_id", "count", "expected"),
    [
        # E=3, Qw=2: entries 0..5 have write sets 01 12 20 01 12 20.
        (0, 0, 6, [0, 2, 3, 5]),
        (1, 0, 6, [0, 1, 3, 4]),
        (2, 0, 6, [1, 2, 4, 5]),
        # Entries 1..4 (write sets 12 20 01 12), as indices within the run.
        (0, 1, 4, [1, 2]),
        (1, 1, 4, [0, 2, 3]),
        (2, 1, 4, [0, 1, 3]),
        (0, 7, 0, []),
    ],
)
def test_entries_for_position_e3_qw2(position: int, first_entry_id: int, count: int,
                                     expected: list[int]) -> None:
    assert entries_for_position(position, first_entry_id, count, 3, 2) == expected


@pytest.mark.parametrize("position", [0, 1, 2])
def test_entries_for_position_with_e_equal_qw_is_every_entry(position: int) -> None:
    assert entries_for_position(position, 0, 5, 3, 3) == [0, 1, 2, 3, 4]
    assert entries_for_position(position, 11, 2, 3, 3) == [0, 1]


@pytest.mark.parametrize(("ensemble_size", "write_quorum"), small_shapes())
def test_positions_cover_each_entry_exactly_write_quorum_times(ensemble_size: int,
                                                               write_quorum: int) -> None:
    for first_entry_id in range(2 * ensemble_size + 1):
        for count in range(2 * ensemble_size + 2):
            holders: list[list[int]] = [[] for _ in range(count)]
            for position in range(ensemble_size):
                indices = entries_for_position(position, first_entry_id, count,
                                               ensemble_size, write_quorum)
                assert indices == sorted(set(indices))
                for index in indices:
                    holders[index].append(position)
            for index, positions in enumerate(holders):
                assert len(positions) == write_quorum
                assert set(positions) == set(
                    write_set(first_entry_id + index, ensemble_size, write_quorum)
                )


# ------------------------------------------------------------- is_quorum_acked


@pytest.mark.parametrize(
    ("acked", "first_entry_id", "count", "expected"),
    [
        ({0, 1, 2}, 0, 6, True),
        ({0, 1}, 0, 3, False),  # entry 1 (12) and entry 2 (20) have one ack each
        ({0, 1}, 0, 1, True),  # only entry 0 (01)
        ({0, 1}, 3, 1, True),  # entry 3 (01)
        ({1, 2}, 1, 1, True),  # entry 1 (12)
        ({0, 1}, 1, 1, False),
        ({1, 2}, 0, 2, False),
        (set(), 0, 1, False),
    ],
)
def test_is_quorum_acked_e3_qw2_qa2(acked: set[int], first_entry_id: int, count: int,
                                    expected: bool) -> None:
    assert is_quorum_acked(acked, first_entry_id, count, 3, 2, 2) is expected


@pytest.mark.parametrize(
    ("acked", "first_entry_id", "count", "expected"),
    [
        ({0}, 0, 1, True),
        ({0}, 0, 2, False),  # entry 1 (12) has none
        ({0, 2}, 0, 9, True),  # every write set of E=3, Qw=2 meets {0, 2}
        ({1}, 0, 2, True),
        ({1}, 0, 3, False),  # entry 2 (20)
    ],
)
def test_is_quorum_acked_e3_qw2_qa1(acked: set[int], first_entry_id: int, count: int,
                                    expected: bool) -> None:
    assert is_quorum_acked(acked, first_entry_id, count, 3, 2, 1) is expected


@pytest.mark.parametrize(
    ("acked", "expected"), [({0, 2}, True), ({1}, False), ({0, 1, 2}, True), (set(), False)]
)
def test_is_quorum_acked_with_e_equal_qw_counts_acks(acked: set[int], expected: bool) -> None:
    assert is_quorum_acked(acked, 4, 10, 3, 3, 2) is expected


@pytest.mark.parametrize(("ensemble_size", "write_quorum"), small_shapes())
def test_is_quorum_acked_matches_its_definition(ensemble_size: int, write_quorum: int) -> None:
    all_acked = [
        set(subset)
        for size in range(ensemble_size + 1)
        for subset in combinations(range(ensemble_size), size)
    ]
    for ack_quorum in range(1, write_quorum + 1):
        for acked in all_acked:
            for first_entry_id in range(ensemble_size + 1):
                for count in range(1, 2 * ensemble_size + 2):
                    expected = all(
                        sum(position in acked
                            for position in write_set(entry_id, ensemble_size, write_quorum))
                        >= ack_quorum
                        for entry_id in range(first_entry_id, first_entry_id + count)
                    )
                    assert is_quorum_acked(acked, first_entry_id, count, ensemble_size,
                                           write_quorum, ack_quorum) is expected


# --------------------------------------------------------------- ensemble_span

ENSEMBLES = [(0, ("a", "b")), (10, ("c", "b")), (25, ("c", "d"))]


@pytest.mark.parametrize(
    ("entry_id", "expected"),
    [
        (0, (9, ("a", "b"))),
        (9, (9, ("a", "b"))),
        (10, (24, ("c", "b"))),
        (24, (24, ("c", "b"))),
        (25, (LAST_ENTRY_ID, ("c", "d"))),
        (10**12, (LAST_ENTRY_ID, ("c", "d"))),
    ],
)
def test_ensemble_span(entry_id: int, expected: tuple[int, tuple[str, ...]]) -> None:
    assert ensemble_span(ENSEMBLES, entry_id) == expected


def test_ensemble_span_of_a_single_ensemble_is_open_ended() -> None:
    assert ensemble_span([(0, ("a",))], 0) == (LAST_ENTRY_ID, ("a",))
    assert ensemble_span([(0, ("a",))], LAST_ENTRY_ID) == (LAST_ENTRY_ID, ("a",))
