"""``folio topic scale``'s argument types and help."""

from __future__ import annotations

import argparse

import pytest

from folio.cli import main
from folio.cli.topic import range_list, segment_list


def test_ranges_and_segments_parse() -> None:
    assert range_list("0.0-0.5,0.5-1.0") == [(0.0, 0.5), (0.5, 1.0)]
    assert range_list(" 0-1 ") == [(0.0, 1.0)]
    assert segment_list("0,orders/3") == ["0", "orders/3"]


@pytest.mark.parametrize("text", ["", "0.5", "a-b", "0.1-0.2,", "0.1-0.2-0.3"])
def test_bad_ranges_are_refused(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="LOW-HIGH"):
        range_list(text)


@pytest.mark.parametrize("text", ["", "0,,1", ","])
def test_bad_segment_lists_are_refused(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="SEGMENT"):
        segment_list(text)


def test_scale_help_names_its_options(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["topic", "scale", "--help"])
    assert exited.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "--seal" in out and "--ranges" in out and "exactly cover" in out
    assert "--split" in out and "--merge" in out and "--parts" in out


def test_scale_without_ranges_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["topic", "scale", "t", "--seal", "0"])
    assert exited.value.code == 2
    assert "--ranges" in capsys.readouterr().err
