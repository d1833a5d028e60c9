"""``folio group reset``'s Kafka-style options parsed, and bad values refused in one line."""

from __future__ import annotations

import datetime

import pytest

from folio.cli import main
from folio.cli._group_reset import parse_datetime, parse_duration, targets
from folio.errors import InvalidArgumentError

_UTC = datetime.UTC


def _ms(year: int, month: int, day: int, hour: int, minute: int, second: int) -> int:
    at = datetime.datetime(year, month, day, hour, minute, second, tzinfo=_UTC)
    return int(at.timestamp() * 1000)


def test_datetimes_as_kafka_consumer_groups_takes_them() -> None:
    assert parse_datetime("2026-11-27T10:20:30.456Z") == _ms(2026, 11, 27, 10, 20, 30) + 456
    assert parse_datetime("2026-11-27T10:20:30Z") == _ms(2026, 11, 27, 10, 20, 30)
    assert parse_datetime("2026-11-27T12:20:30.000+02:00") == _ms(2026, 11, 27, 10, 20, 30)
    assert parse_datetime("2026-11-27T08:20:30.5-02:00") == _ms(2026, 11, 27, 10, 20, 30) + 500
    local = datetime.datetime(2026, 11, 27, 10, 20, 30).astimezone()
    assert parse_datetime("2026-11-27T10:20:30") == int(local.timestamp() * 1000)


@pytest.mark.parametrize("text", ["2026-11-27", "2026-11-27 10:20:30", "yesterday",
                                  "2026-13-27T10:20:30", "2026-11-27T10:20:30+2"])
def test_bad_datetimes_are_refused(text: str) -> None:
    with pytest.raises(InvalidArgumentError, match="--to-datetime"):
        parse_datetime(text)


def test_durations_count_back_from_now() -> None:
    now = 10_000_000_000
    assert parse_duration("PT30M", now) == now - 30 * 60_000
    assert parse_duration("P1DT2H", now) == now - (26 * 3600_000)
    assert parse_duration("PT1.5S", now) == now - 1500
    assert parse_duration("P2D", now) == now - 2 * 86_400_000


@pytest.mark.parametrize("text", ["P", "PT", "P1DT", "1h", "PT-5M", "P1H", "PT5M3H"])
def test_bad_durations_are_refused(text: str) -> None:
    with pytest.raises(InvalidArgumentError, match="--by-duration"):
        parse_duration(text, 0)


def test_topics_and_partitions() -> None:
    assert targets(None) == ([], [])
    assert targets(["a", "b:0,2", "c.d:1"]) == (["a"], [("b", 0), ("b", 2), ("c.d", 1)])
    for bad in ("b:", "b:x", ":1", "b:1,"):
        with pytest.raises(InvalidArgumentError, match="--topic"):
            targets([bad])


@pytest.mark.parametrize(("argv", "said"), [
    (["--to-offset", "-1"], "--to-offset -1: must be 0 or more"),
    (["--to-datetime", "now"], "--to-datetime 'now': expected YYYY-MM-DDTHH:mm:SS"),
    (["--by-duration", "1d"], "--by-duration '1d': expected an ISO-8601 duration"),
    (["--to-latest", "--topic", "t:a"], "--topic 't:a': expected TOPIC or TOPIC:P"),
    (["--to-latest", "--checkpoint", "c"], "--checkpoint goes with --to checkpoint"),
])
def test_bad_values_are_one_line_errors_before_any_call(
        argv: list[str], said: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["group", "reset", "g", *argv, "--endpoint", "127.0.0.1:1"])
    err = capsys.readouterr().err
    assert code == 1
    assert err.startswith("folio group reset: error: ") and said in err
    assert err.count("\n") == 1
