"""Renamed duration parameters: the old spelling still works for one release, with a warning."""

from __future__ import annotations

import pytest

from folio._deprecated import renamed_timeout
from folio.errors import InvalidArgumentError


def test_the_new_spelling_passes_through_without_a_warning() -> None:
    assert renamed_timeout("R.read_next", 1.5, "timeout_ms", None, 0.001) == 1.5
    assert renamed_timeout("R.read_next", None, "timeout_ms", None, 0.001) is None


def test_the_old_spelling_is_converted_to_seconds_with_a_warning_naming_the_new_one() -> None:
    with pytest.warns(DeprecationWarning,
                      match=r"R\.read_next\(timeout_ms=\.\.\.\) is deprecated .* pass timeout= "
                            r"in seconds"):
        assert renamed_timeout("R.read_next", None, "timeout_ms", 250, 0.001) == 0.25
    with pytest.warns(DeprecationWarning, match=r"timeout_s=\.\.\."):
        assert renamed_timeout("G.initiate_checkpoint", None, "timeout_s", 60, 1.0) == 60


def test_both_spellings_at_once_are_refused() -> None:
    with pytest.warns(DeprecationWarning), \
            pytest.raises(InvalidArgumentError, match=r"give timeout .* or timeout_ms, not both"):
        renamed_timeout("R.read_next", 1.0, "timeout_ms", 1000, 0.001)
