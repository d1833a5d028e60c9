"""The Kafka-style options of the ``folio`` CLI without a server (issue 13, section 4).

Parsing and usage errors (exit 2), the endpoint before or after the command
and ``--bootstrap`` lists, ``--version``, exact key ranges and --split/--merge
arithmetic, produce's line formats, consume's --print/--json output (and
that ``produce --json`` reads it back), and the start plans of
--from-offset/--from-time, the time search running on an in-memory segment.
"""

from __future__ import annotations

import argparse
import itertools
import json
from collections.abc import Iterator

import pytest

import folio
from folio.cli import build_parser, main
from folio.cli._common import DEFAULT_ENDPOINT, endpoint_list
from folio.cli._consume_format import event_json, formatter, print_fields
from folio.cli._consume_start import (
    StartPlan,
    first_offset_at,
    offset_start,
    parse_time_ms,
    plan_from_offsets,
)
from folio.cli._produce_lines import LineError, LineFormat, header_pair, parse_line
from folio.cli._topic_scale import format_range, merge_range, range_list, split_ranges
from folio.errors import InvalidArgumentError


@pytest.mark.parametrize("argv", [
    ["perf", "produce", "--topic", "t", "--duration-s", "0"],
    ["consume", "t", "--print", "key,colour"],
    ["consume", "t", "--print", "key", "--json"],
    ["consume", "t", "--from-time", "yesterday"],
    ["consume", "t", "--from-time", "2026-01-01", "--from-beginning"],
    ["consume", "t", "--from-offset", "0"],
    ["consume", "t", "--from-offset", "0:-1"],
    ["consume", "t", "--group", "g", "--from-offset", "0:1"],
    ["consume", "t", "--from-offset", "0:1", "--from-time", "1000"],
    ["produce", "t", "--key", "k", "--key-separator", ","],
    ["produce", "t", "--json", "--key-separator", ","],
    ["produce", "t", "--key-separator", ""],
    ["produce", "t", "--header", "novalue"],
    ["topic", "alter", "t"],
    ["topic", "truncate", "t", "--before", "3"],
    ["topic", "truncate", "t", "--segment", "0"],
    ["topic", "scale", "t", "--split", "0", "--merge", "1,2"],
    ["topic", "scale", "t", "--split", "0", "--parts", "1"],
    ["topic", "scale", "t", "--merge", "1", "--parts", "3"],
    ["topic", "scale", "t"],
])
def test_bad_arguments_exit_2_with_a_message(argv: list[str],
                                              capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert "error:" in capsys.readouterr().err


def test_duration_0_is_refused_with_a_reason(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["perf", "produce", "--topic", "t", "--duration-s", "0"])
    assert "must be a positive number" in capsys.readouterr().err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.startswith("folio ")


@pytest.mark.parametrize(("argv", "expected"), [
    (["--endpoint", "a:1", "topic", "list"], "a:1"),
    (["topic", "list", "--endpoint", "b:2", "--json"], "b:2"),
    (["--endpoint", "a:1", "topic", "list", "--endpoint", "b:2"], "b:2"),
    (["--bootstrap", "a:1,b:2", "consume", "t"], "a:1,b:2"),
    (["produce", "t", "--bootstrap", "c:3"], "c:3"),
    (["perf", "consume", "--topic", "t", "--endpoint", "d:4"], "d:4"),
    (["topic", "list"], None),
])
def test_endpoint_before_or_after_the_command(argv: list[str], expected: str | None) -> None:
    assert build_parser().parse_args(argv).endpoint == expected


def test_topic_list_json_parses_after_the_endpoint() -> None:
    args = build_parser().parse_args(["--endpoint", "x:1", "topic", "list", "--json"])
    assert (args.endpoint, args.json) == ("x:1", True)


def test_an_endpoint_list_goes_to_the_client_whole() -> None:
    # The SDK bootstraps from the list (tests/integration/test_cluster_client.py);
    # the CLI only tidies it, and probes nothing.
    assert endpoint_list(" a:1, b:2 ,a:1,") == "a:1,b:2"
    assert endpoint_list("only:1") == "only:1"
    assert endpoint_list(" , ") == DEFAULT_ENDPOINT


def test_ranges_are_printed_exactly_and_parse_back() -> None:
    parts = split_ranges(0.0, 0.5, 3)
    assert parts[0][0] == 0.0 and parts[-1][1] == 0.5
    assert all(a[1] == b[0] for a, b in itertools.pairwise(parts))
    printed = ",".join(format_range(low, high)[1:-1].replace(", ", "-") for low, high in parts)
    assert range_list(printed) == parts  # bit for bit
    assert format_range(1 / 3, 0.5) == "[0.3333333333333333, 0.5)"
    assert range_list("1e-05-0.5,0.5-1.0") == [(1e-05, 0.5), (0.5, 1.0)]
    assert range_list("0-1E-3") == [(0.0, 0.001)]


def _segment(number: int, low: float, high: float, *, sealed: bool = False, start: int = 0,
             end: int = 0, predecessors: tuple[int, ...] = (),
             successors: tuple[int, ...] = ()) -> folio.SegmentRange:
    return folio.SegmentRange(
        f"t/{number}", number, low, high, sealed, start, end,
        tuple(f"t/{n}" for n in predecessors), tuple(f"t/{n}" for n in successors))


def test_merge_needs_neighbours() -> None:
    assert merge_range([_segment(2, 0.5, 1.0), _segment(1, 0.25, 0.5)]) == (0.25, 1.0)
    with pytest.raises(InvalidArgumentError, match="not neighbours"):
        merge_range([_segment(1, 0.0, 0.25), _segment(2, 0.5, 1.0)])


def test_key_separator_splits_at_the_first_separator() -> None:
    form = LineFormat(key_separator=b":", headers={"h": b"v"})
    assert parse_line(b"k:a:b", form) == (b"a:b", "k", {"h": b"v"})
    assert parse_line(b":payload", form) == (b"payload", None, {"h": b"v"})
    with pytest.raises(LineError, match="no key separator ':'"):
        parse_line(b"no separator", form)
    assert parse_line(b"raw", LineFormat(key="k")) == (b"raw", "k", {})
    assert header_pair("a=b=c") == ("a", b"b=c")
    with pytest.raises(argparse.ArgumentTypeError):
        header_pair("=v")


@pytest.mark.parametrize(("line", "why"), [
    (b"not json", "not a JSON object"),
    (b"[1, 2]", "not a JSON object but a list"),
    (b'{"key": "k"}', "exactly one of"),
    (b'{"payload": "a", "payload_base64": "YQ=="}', "exactly one of"),
    (b'{"payload": 5}', "JSON string"),
    (b'{"payload_base64": "***"}', "not valid base64"),
    (b'{"payload": "a", "encoding": "latin-1"}', '"encoding"'),
    (b'{"payload": "a", "key": 7}', '"key"'),
    (b'{"payload": "a", "headers": {"h": 1}}', '"headers"'),
])
def test_bad_json_lines_say_why(line: bytes, why: str) -> None:
    with pytest.raises(LineError, match=why):
        parse_line(line, LineFormat(json=True))


def test_json_lines_with_defaults() -> None:
    form = LineFormat(json=True, key="default", headers={"a": b"1", "b": b"2"})
    assert parse_line(b'{"payload": "x", "headers": {"b": "3"}}', form) == (
        b"x", "default", {"a": b"1", "b": b"3"})
    assert parse_line(b'{"payload_base64": "AP8="}', form)[:2] == (b"\x00\xff", "default")
    assert parse_line(b'{"payload": "x", "key": null}', form)[1] is None  # said: no key
    assert parse_line(b'{"payload": "x", "key": "k"}', form)[1] == "k"


def _event(payload: bytes, key: str | None = "k", headers: dict[str, bytes] | None = None,
           timestamp: int | None = 1700000000000) -> folio.Event[bytes]:
    return folio.Event(payload, key, "t/3", 42, timestamp, headers or {})


def test_print_fields_come_before_the_payload_tab_separated() -> None:
    assert print_fields("offset, key") == ["offset", "key"]
    line = formatter(print_fields("key,segment,offset,timestamp,headers"), False)
    assert line is not None
    assert line(_event(b"p", headers={"a": b"1", "b": b"2"})) == \
        b"k\t3\t42\t1700000000000\ta=1,b=2\tp\n"
    assert line(_event(b"\xff", key=None, timestamp=None)) == \
        b"null\t3\t42\tnull\tNO_HEADERS\t\xff\n"
    assert formatter(None, False) is None  # raw payloads, the fast path
    with pytest.raises(argparse.ArgumentTypeError, match="choose from"):
        print_fields("key,partition")


def test_json_output_is_utf8_or_base64_and_produce_reads_it_back() -> None:
    line = formatter(None, True)
    assert line is not None
    text = json.loads(line(_event(b"h\xc3\xa9", headers={"h": b"v"})))
    assert text == {"key": "k", "segment": "t/3", "offset": 42, "timestamp": 1700000000000,
                    "headers": {"h": "v"}, "payload": "h\u00e9", "encoding": "utf-8"}
    binary = _event(b"\x00\xff", key=None, headers={"raw": b"\xfe"})
    assert event_json(binary)["encoding"] == "base64"
    assert event_json(binary)["payload"] == "AP8="
    for event in (_event(b"h\xc3\xa9", headers={"h": b"v"}), binary):
        assert parse_line(line(event).rstrip(b"\n"), LineFormat(json=True)) == (
            event.payload, event.routing_key, dict(event.headers))


def test_offset_and_time_arguments() -> None:
    assert offset_start("0:42") == ("0", 42)
    assert offset_start("orders/3:0") == ("orders/3", 0)
    for bad in ("42", ":1", "0:x", "0:-1"):
        with pytest.raises(argparse.ArgumentTypeError, match="SEGMENT:OFFSET"):
            offset_start(bad)
    assert parse_time_ms("2026-11-24T03:00:00Z") == 1795489200000
    assert parse_time_ms("2026-11-24T03:00:00") == 1795489200000  # no zone: UTC
    assert parse_time_ms("2026-11-24T04:00:00+01:00") == 1795489200000
    assert parse_time_ms("1795489200000") == 1795489200000


def test_from_offset_on_open_segments_starts_exactly_there() -> None:
    # Segments not named start at their first event, as the SDK's start mapping.
    every = [_segment(0, 0.0, 0.5, end=10), _segment(1, 0.5, 1.0, end=20)]
    assert plan_from_offsets("t", every, [("0", 3)], False) == StartPlan({"t/0": 3, "t/1": 0})
    assert plan_from_offsets("t", every, [("t/1", 5)], True) == StartPlan({"t/0": 0, "t/1": 5})
    with pytest.raises(InvalidArgumentError, match="no segment '7'"):
        plan_from_offsets("t", every, [("7", 0)], False)


def test_from_offset_in_a_sealed_segment_reads_its_successors_after_it() -> None:
    # 0 was split into 2 and 3; 1 is untouched.
    every = [_segment(0, 0.0, 0.5, sealed=True, end=10, successors=(2, 3)),
             _segment(1, 0.5, 1.0, end=20),
             _segment(2, 0.0, 0.25, end=4, predecessors=(0,)),
             _segment(3, 0.25, 0.5, end=6, predecessors=(0,))]
    plan = plan_from_offsets("t", every, [("0", 7)], False)
    assert plan == StartPlan("earliest", {"t/0": 7, "t/1": 0, "t/2": 0, "t/3": 0})
    plan = plan_from_offsets("t", every, [("2", 1)], True)
    assert plan == StartPlan("earliest", {"t/0": 10, "t/1": 0, "t/2": 1, "t/3": 0})
    plan = plan_from_offsets("t", every, [("2", 1)], False)
    assert plan.start == {"t/1": 0, "t/2": 1, "t/3": 0}


class _FakeBatch:
    """``read_segment`` over an in-memory segment: offset -> timestamp (gaps: aborted)."""

    def __init__(self, stamps: dict[int, int]) -> None:
        self.stamps = stamps
        self.reads = 0

    def read_segment(self, segment: str, start: int, end: int, *,
                     isolation: str) -> Iterator[folio.Event[bytes]]:
        assert isolation == "read_uncommitted"  # never waits on an open transaction
        self.reads += 1
        for offset in sorted(self.stamps):
            if start <= offset < end:
                yield folio.Event(b"", None, segment, offset, self.stamps[offset], {})


@pytest.mark.parametrize(("time_ms", "expected"), [
    (0, 0), (100, 0), (101, 2), (300, 2), (301, 6), (700, 9), (701, 10), (10**15, 10)])
def test_time_search_finds_the_first_event_at_or_after(time_ms: int, expected: int) -> None:
    # Offsets 1, 3, 4, 5 left out (aborted); equal stamps at 6 and 7.
    batch = _FakeBatch({0: 100, 2: 300, 6: 500, 7: 500, 8: 600, 9: 700})
    segment = _segment(0, 0.0, 1.0, end=10)
    assert first_offset_at(batch, segment, time_ms) == expected  # type: ignore[arg-type]


def test_time_search_reads_about_log2_events() -> None:
    batch = _FakeBatch({offset: offset * 10 for offset in range(1000)})
    segment = _segment(0, 0.0, 1.0, end=1000)
    assert first_offset_at(batch, segment, 4321) == 433  # type: ignore[arg-type]
    assert batch.reads <= 11


@pytest.mark.parametrize(("argv", "mentions"), [
    (("consume",), ["--print", "--json", "--from-offset", "--from-time", "by reads",
                    "NO_HEADERS", "base64", "SIGTERM"]),
    (("produce",), ["--key-separator", "--header", "--json", "payload_base64", "line N",
                    "SIGTERM", "exit 0"]),
    (("topic", "create"), ["--if-not-exists", "as it is"]),
    (("topic", "list"), ["--json"]),
    (("topic", "alter"), ["--retention-ms", "--max-event-bytes", "others keep"]),
    (("topic", "truncate"), ["--segment", "--before", "whole ledger"]),
    (("topic", "scale"), ["--split", "--parts", "--merge", "neighbouring", "exact"]),
    (("topic", "describe"), ["repr"]),
    (("perf", "consume"), ["data age", "data_age_ms", "SIGTERM"]),
    (("perf", "produce"), ["> 0", "SIGTERM"]),
    ((), ["--version", "--endpoint", "--bootstrap", "before or after"]),
])
def test_help_explains_the_new_options(argv: tuple[str, ...], mentions: list[str],
                                       capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--help"])
    assert exit_info.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    for mention in mentions:
        assert mention in text, f"{' '.join(argv)} --help lacks {mention!r}"
