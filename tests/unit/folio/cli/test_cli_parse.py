"""The client commands of the ``folio`` CLI without a server: parsers, --help, helpers.

Every command's ``--help`` exits 0 and names its key options; bad arguments
exit 2 (argparse's usage error). The helpers that need no broker are checked
directly: the endpoint's layering, stdin line splitting, the latency
histograms, and the produce and consume loops on in-memory fakes.
"""

from __future__ import annotations

import argparse
import io
import json
from collections.abc import Iterator, Mapping
from concurrent.futures import Future
from typing import Any

import pytest

from folio.cli import build_parser, main
from folio.cli._common import DEFAULT_ENDPOINT, describe_error, resolve_endpoint
from folio.cli._perf_consume import ConsumeConfig, run_consume
from folio.cli._perf_produce import GROUP_SIZE, ProduceConfig, ProduceResult, run_produce
from folio.cli._perf_stats import latency_ms, merge_encoded, new_histogram, record_us
from folio.cli.consume import _copy_events
from folio.cli.produce import lines_of
from folio.cli.topic import topic_json
from folio.errors import FolioUnavailableError, TopicExistsError

HELP_MENTIONS = {
    ("topic",): ["create", "list", "describe", "delete"],
    ("topic", "create"): ["--segments", "--retention-ms", "--retention-bytes",
                          "--max-event-bytes", "--endpoint", "default 1"],
    ("topic", "list"): ["--endpoint", "segments"],
    ("topic", "describe"): ["--json", "start_offset", "key_low", "--endpoint"],
    ("topic", "delete"): ["NAME", "--endpoint"],
    ("produce",): ["--key", "TOPIC", "acknowledged", "--endpoint"],
    ("consume",): ["--from-beginning", "--max-events", "--timeout-ms", "latest", "--endpoint"],
    ("perf",): ["produce", "consume"],
    ("perf", "produce"): ["--topic", "--event-bytes", "default 100", "--rate", "default 0",
                          "--duration-s", "default 10", "--writers", "--json",
                          "--batch-size-bytes", "--linger-ms", "--max-in-flight",
                          "first send", "p99.9"],
    ("perf", "consume"): ["--topic", "--duration-s", "--max-events", "--from-beginning",
                          "--from", "--json", "--timeout-ms"],
}


def _help(argv: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args([*argv, "--help"])
    assert exit_info.value.code == 0
    return " ".join(capsys.readouterr().out.split())


def test_top_level_help_lists_client_and_server_commands(
        capsys: pytest.CaptureFixture[str]) -> None:
    text = _help((), capsys)
    for command in ("topic", "produce", "consume", "perf", "bookie", "standalone"):
        assert command in text


@pytest.mark.parametrize("argv", sorted(HELP_MENTIONS))
def test_help_exits_0_and_names_key_options(
        argv: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> None:
    text = _help(argv, capsys)
    for mention in HELP_MENTIONS[argv]:
        assert mention in text, f"{' '.join(argv)} --help lacks {mention!r}"


@pytest.mark.parametrize("argv", [
    ["topic"],
    ["topic", "create"],
    ["topic", "create", "t", "--segments", "0"],
    ["topic", "create", "t", "--segments", "two"],
    ["topic", "create", "t", "--retention-ms", "-2"],
    ["topic", "describe"],
    ["topic", "frobnicate"],
    ["produce"],
    ["consume"],
    ["consume", "t", "--max-events", "0"],
    ["consume", "t", "--timeout-ms", "soon"],
    ["perf"],
    ["perf", "produce"],
    ["perf", "produce", "--topic", "t", "--rate", "-5"],
    ["perf", "produce", "--topic", "t", "--writers", "0"],
    ["perf", "consume"],
    ["perf", "consume", "--topic", "t", "--from", "middle"],
    ["perf", "consume", "--topic", "t", "--from", "latest", "--from-beginning"],
])
def test_bad_arguments_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert "error:" in capsys.readouterr().err


def test_no_command_prints_help_and_returns_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "COMMAND" in capsys.readouterr().err


def test_defaults() -> None:
    parser = build_parser()
    create = parser.parse_args(["topic", "create", "t"])
    assert (create.name, create.segments, create.retention_ms) == ("t", 1, None)
    assert parser.parse_args(["topic", "create", "t", "--retention-bytes", "-1"]
                             ).retention_bytes == -1
    consume = parser.parse_args(["consume", "t"])
    assert (consume.from_beginning, consume.max_events, consume.timeout_ms) == (
        False, None, None)
    produce = parser.parse_args(["perf", "produce", "--topic", "t"])
    assert (produce.event_bytes, produce.rate, produce.duration_s, produce.writers,
            produce.json, produce.linger_ms) == (100, 0.0, 10.0, 1, False, None)
    assert parser.parse_args(["perf", "consume", "--topic", "t"]).start is None  # latest
    assert parser.parse_args(
        ["perf", "consume", "--topic", "t", "--from-beginning"]).start == "earliest"
    assert parser.parse_args(
        ["perf", "consume", "--topic", "t", "--from", "earliest"]).start == "earliest"


@pytest.mark.parametrize(("flag", "environ", "expected"), [
    (None, {}, DEFAULT_ENDPOINT),
    (None, {"FOLIO_ENDPOINT": ""}, DEFAULT_ENDPOINT),
    (None, {"FOLIO_ENDPOINT": "env:1"}, "env:1"),
    ("flag:2", {"FOLIO_ENDPOINT": "env:1"}, "flag:2"),
])
def test_endpoint_is_flag_then_environment_then_default(
        flag: str | None, environ: Mapping[str, str], expected: str) -> None:
    assert resolve_endpoint(argparse.Namespace(endpoint=flag), environ) == expected


def test_unavailable_broker_message_says_how_to_start_one() -> None:
    message = describe_error(FolioUnavailableError("connection refused"), "localhost:1")
    assert "no broker at localhost:1" in message
    assert "make run" in message and "folio standalone" in message
    assert describe_error(TopicExistsError("topic 't' exists\n"), "x") == "topic 't' exists"


def test_lines_strip_only_the_trailing_newline() -> None:
    data = b"a\n\nb\r\n \xff\x00 \nlast"
    assert list(lines_of(io.BytesIO(data))) == [b"a", b"", b"b\r", b" \xff\x00 ", b"last"]
    assert list(lines_of(io.BytesIO(b"x\n"))) == [b"x"]
    assert list(lines_of(io.BytesIO(b""))) == []


def test_latency_is_reported_in_ms_and_histograms_merge() -> None:
    assert latency_ms(new_histogram()) == {"p50": None, "p99": None, "p999": None, "max": None}
    first, second = new_histogram(), new_histogram()
    record_us(first, 1000, 99)
    record_us(second, 50_000, 1)
    record_us(second, 0)  # clamped to 1 µs, not refused
    merged = merge_encoded([first.encode(), second.encode()])
    assert merged.get_total_count() == 101
    latency = latency_ms(merged)
    assert latency["p50"] == pytest.approx(1.0, rel=1e-3)
    assert latency["max"] == pytest.approx(50.0, rel=1e-3)


def test_group_size_shrinks_at_low_rates() -> None:
    def config(rate: float) -> ProduceConfig:
        return ProduceConfig("e", "t", 100, rate, 1.0)

    assert [config(r).group_size for r in (0, 1, 500, 1600, 10**6)] == [
        GROUP_SIZE, 1, 5, GROUP_SIZE, GROUP_SIZE]


class FakeWriter:
    """Acknowledges every event at once, in the calling thread."""

    def __init__(self, fail_after: int | None = None) -> None:
        self.events: list[bytes] = []
        self.fail_after = fail_after
        self.closed = False

    def write_event(self, event: bytes, routing_key: str | None = None) -> Future[Any]:
        future: Future[Any] = Future()
        self.events.append(event)
        if self.fail_after is not None and len(self.events) > self.fail_after:
            future.set_exception(FolioUnavailableError("gone"))
        else:
            future.set_result(None)
        return future

    def flush(self, timeout: float | None = None) -> None:
        if self.fail_after is not None and len(self.events) > self.fail_after:
            raise FolioUnavailableError("gone")

    def close(self, timeout: float | None = None) -> None:
        self.closed = True


class FakeClient:
    def __init__(self, writer: FakeWriter) -> None:
        self.fake_writer = writer
        self.options: dict[str, Any] = {}

    def writer(self, topic: str, **options: Any) -> FakeWriter:
        self.options = options
        return self.fake_writer


def test_perf_produce_loop_counts_groups_and_records_each_event() -> None:
    client = FakeClient(FakeWriter())
    ticks: list[int] = []
    config = ProduceConfig("e", "t", 100, 0.0, 0.05, linger_ms=1.0)
    result = run_produce(client, config, ticks.append)  # type: ignore[arg-type]
    assert client.options == {"linger_ms": 1.0}
    assert isinstance(result, ProduceResult)
    assert result.events == result.sent > 0 and result.events % GROUP_SIZE == 0
    assert result.errors == 0 and result.error is None
    assert merge_encoded([result.histogram]).get_total_count() == result.events
    assert all(len(event) == 100 for event in client.fake_writer.events)
    assert client.fake_writer.closed


def test_perf_produce_loop_reports_unacknowledged_events() -> None:
    client = FakeClient(FakeWriter(fail_after=GROUP_SIZE * 3))
    result = run_produce(client, ProduceConfig("e", "t", 10, 0.0, 0.05))  # type: ignore[arg-type]
    assert result.events == GROUP_SIZE * 3
    assert result.errors == result.sent - GROUP_SIZE * 3 > 0
    assert result.error == "gone"


class FakeEvent:
    def __init__(self, payload: bytes) -> None:
        self.payload = payload


class FakeReader:
    """Serves ``payloads``, then nothing (``read_next`` returns None at once)."""

    def __init__(self, payloads: list[bytes]) -> None:
        self._payloads: Iterator[bytes] = iter(payloads)

    def read_next(self, timeout: float | None = None) -> FakeEvent | None:
        payload = next(self._payloads, None)
        return None if payload is None else FakeEvent(payload)

    def read_many(self, max_events: int, timeout: float | None = None) -> list[FakeEvent]:
        events: list[FakeEvent] = []
        while len(events) < max_events and (event := self.read_next(0)) is not None:
            events.append(event)
        return events

    def __enter__(self) -> FakeReader:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


def test_consume_writes_raw_payloads_and_stops_at_max_events() -> None:
    out = io.BytesIO()
    payloads = [b"one", b"", b"\xff\x00binary", b"four"]
    _copy_events(FakeReader(payloads), out, 3, None)  # type: ignore[arg-type]
    assert out.getvalue() == b"one\n\n\xff\x00binary\n"


def test_consume_stops_after_timeout_without_events() -> None:
    out = io.BytesIO()
    _copy_events(FakeReader([b"a"]), out, None, 10)  # type: ignore[arg-type]
    assert out.getvalue() == b"a\n"


@pytest.mark.parametrize("read_next", [False, True])
def test_perf_consume_loop_counts_bytes_and_stops_at_max_events(read_next: bool) -> None:
    class Client:
        def reader(self, topic: str, start: str) -> FakeReader:
            return FakeReader([b"x" * 10] * 3000)

    config = ConsumeConfig("t", "earliest", max_events=2040, read_next=read_next)
    result = run_consume(Client(), config)  # type: ignore[arg-type]
    assert (result.events, result.payload_bytes, result.stopped_by) == (
        2040, 20400, "max-events")


def test_describe_json_keys_are_stable() -> None:
    class Config:
        retention_ms = 1
        retention_bytes = 2
        max_event_bytes = 3
        ledger_rollover_bytes = 4
        ledger_rollover_ms = 5
        scale_target_events_per_s = 6
        scale_min_segments = 7
        scale_cooldown_ms = 8

    class Segment:
        name, number, key_low, key_high = "t/2", 2, 0.0, 1.0
        sealed, start_offset, end_offset = False, 3, 7
        predecessors, successors = ("t/0", "t/1"), ()
        owner = ""

    class Topic:
        name, created_ms, config, segments, sealed = "t", 123, Config(), (Segment(),), False

    document = json.loads(json.dumps(topic_json(Topic())))  # type: ignore[arg-type]
    assert sorted(document) == ["config", "created_ms", "name", "sealed", "segments"]
    assert sorted(document["config"]) == sorted(
        ["retention_ms", "retention_bytes", "max_event_bytes", "ledger_rollover_bytes",
         "ledger_rollover_ms", "scale_target_events_per_s", "scale_min_segments",
         "scale_cooldown_ms"])
    assert document["segments"] == [{"name": "t/2", "number": 2, "key_low": 0.0,
                                     "key_high": 1.0, "state": "open", "sealed": False,
                                     "start_offset": 3, "end_offset": 7, "length": 4,
                                     "predecessors": ["t/0", "t/1"], "successors": [],
                                     "owner": None}]
