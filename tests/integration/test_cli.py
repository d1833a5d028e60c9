"""The client commands of ``folio`` as a user runs them, against a real ``folio standalone``.

One server (API and metrics on free ports) serves the whole module; each
test uses its own topics. Every command runs as a subprocess
(``python -m folio.cli``), and each test asserts exit codes, the exact
stdout, and the one-line ``folio CMD: error: ...`` on failures.
"""

from __future__ import annotations

import itertools
import json
import selectors
import signal
import subprocess
import time
from pathlib import Path

from tests.support.bookies import BookieProcess, folio_argv, folio_env
from tests.support.zookeeper import free_port

RUN_TIMEOUT_S = 60.0
LATENCY_KEYS = {"p50", "p99", "p999", "max"}




def folio(server: BookieProcess | None, *args: str, stdin: bytes = b"",
          endpoint: str | None = None) -> subprocess.CompletedProcess[bytes]:
    """Run ``folio ARGS --endpoint SERVER`` to completion with ``stdin``; bytes out."""
    address = endpoint or (server.address if server else "")
    return subprocess.run(
        [*folio_argv(*args), "--endpoint", address], input=stdin, capture_output=True,
        env=folio_env(), timeout=RUN_TIMEOUT_S, check=False,
    )


def ok(result: subprocess.CompletedProcess[bytes]) -> str:
    """stdout of a run that must have succeeded (else fail with its stderr)."""
    assert result.returncode == 0, result.stderr.decode(errors="replace")
    return result.stdout.decode()


def one_error_line(result: subprocess.CompletedProcess[bytes], prog: str) -> str:
    """The single stderr line of a run that must have failed with exit code 1."""
    assert result.returncode == 1, (result.stdout, result.stderr)
    lines = result.stderr.decode().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"{prog}: error: "), lines
    return lines[0]


def test_topic_create_list_describe_delete(server: BookieProcess) -> None:
    created = ok(folio(server, "topic", "create", "orders", "--segments", "3",
                       "--retention-ms", "60000", "--max-event-bytes", "4096"))
    assert created.startswith("created topic orders with 3 segments")
    assert "retention_ms 60000" in created and "max_event_bytes 4096" in created

    assert "orders\t3" in ok(folio(server, "topic", "list")).splitlines()

    described = json.loads(ok(folio(server, "topic", "describe", "orders", "--json")))
    assert described["name"] == "orders"
    assert described["config"]["retention_ms"] == 60000
    assert described["config"]["max_event_bytes"] == 4096
    segments = described["segments"]
    assert len(segments) == 3
    assert segments[0]["key_low"] == 0.0 and segments[-1]["key_high"] == 1.0
    for before, after in itertools.pairwise(segments):
        assert before["key_high"] == after["key_low"]
    assert all(s["start_offset"] == 0 and s["end_offset"] == 0 and not s["sealed"]
               for s in segments)
    assert set(segments[0]) == {"name", "number", "key_low", "key_high", "state", "sealed",
                                "start_offset", "end_offset", "length", "predecessors",
                                "successors", "owner"}

    human = ok(folio(server, "topic", "describe", "orders"))
    assert human.startswith("topic orders") and "retention_ms" in human
    assert all(s["name"] in human for s in segments)
    # Who serves each segment (Kafka's Leader column): the standalone itself.
    assert all(s["owner"] == server.address for s in segments)
    assert "OWNER" in human.splitlines()[-4]
    assert all(line.rstrip().endswith(server.address) for line in human.splitlines()[-3:])

    duplicate = one_error_line(folio(server, "topic", "create", "orders"),
                               "folio topic create")
    assert "orders" in duplicate

    assert ok(folio(server, "topic", "delete", "orders")) == "deleted topic orders\n"
    assert "orders" not in ok(folio(server, "topic", "list")).split()
    one_error_line(folio(server, "topic", "describe", "orders"), "folio topic describe")
    one_error_line(folio(server, "topic", "delete", "orders"), "folio topic delete")


def test_no_broker_says_how_to_start_one(server: BookieProcess) -> None:
    closed = f"127.0.0.1:{free_port()}"
    line = one_error_line(folio(None, "topic", "list", endpoint=closed), "folio topic list")
    assert f"no broker at {closed}" in line
    assert "make run" in line and "folio standalone" in line


def test_names_kafka_accepts_and_the_reserved_ones(server: BookieProcess) -> None:
    for name in ("_schemas", ".hidden"):
        assert ok(folio(server, "topic", "create", name)).startswith(f"created topic {name} ")
        ok(folio(server, "produce", name, stdin=b"one\n"))
        assert ok(folio(server, "consume", name, "--from-beginning", "--max-events", "1")
                  ) == "one\n"
    reserved = one_error_line(folio(server, "topic", "create", "__folio_x"),
                              "folio topic create")
    assert "is internal to the broker" in reserved
    bad = one_error_line(folio(server, "topic", "create", ".."), "folio topic create")
    assert "topic name cannot be '..'" in bad


def test_produce_then_consume_from_beginning_gives_the_same_lines(server: BookieProcess) -> None:
    ok(folio(server, "topic", "create", "lines"))
    lines = [f"line {i}".encode() for i in range(98)] + [b"", b"\xff\x00\tbinary \r"]
    produced = folio(server, "produce", "lines", stdin=b"".join(line + b"\n" for line in lines))
    ok(produced)
    assert produced.stderr.decode().strip() == "100 events acknowledged"

    consumed = folio(server, "consume", "lines", "--from-beginning", "--max-events", "100")
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout == b"".join(line + b"\n" for line in lines)


def test_produce_with_keys_keeps_order_per_key(server: BookieProcess) -> None:
    ok(folio(server, "topic", "create", "keyed", "--segments", "4"))
    for key in ("alpha", "beta"):
        stdin = b"".join(f"{key} {i}\n".encode() for i in range(50))
        assert folio(server, "produce", "keyed", "--key", key, stdin=stdin
                     ).stderr.decode().strip() == "50 events acknowledged"
    consumed = ok(folio(server, "consume", "keyed", "--from-beginning", "--max-events", "100"))
    lines = consumed.splitlines()
    assert sorted(lines) == sorted([f"{k} {i}" for k in ("alpha", "beta") for i in range(50)])
    for key in ("alpha", "beta"):
        assert [line for line in lines if line.startswith(key)] == [
            f"{key} {i}" for i in range(50)]


def test_produce_to_unknown_topic_fails(server: BookieProcess) -> None:
    line = one_error_line(folio(server, "produce", "missing", stdin=b"a\nb\n"),
                          "folio produce")
    # The writer is refused before a line is read: nothing was written.
    assert line == ("folio produce: error: topic 'missing' does not exist "
                    "(0 of 0 events acknowledged)")


def test_consume_timeout_returns_when_idle(server: BookieProcess) -> None:
    ok(folio(server, "topic", "create", "idle"))
    ok(folio(server, "produce", "idle", stdin=b"only\n"))
    started = time.monotonic()
    consumed = folio(server, "consume", "idle", "--from-beginning", "--timeout-ms", "500")
    assert ok(consumed) == "only\n"
    assert time.monotonic() - started < 30


def _read_line(process: subprocess.Popen[bytes], timeout_s: float) -> bytes:
    assert process.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        assert selector.select(timeout_s), "no output in time"
    return process.stdout.readline()


def test_consume_exits_0_quietly_on_ctrl_c_and_on_a_closed_pipe(
        server: BookieProcess, tmp_path: Path) -> None:
    ok(folio(server, "topic", "create", "big"))
    payload = b"x" * 1000
    ok(folio(server, "produce", "big", stdin=(payload + b"\n") * 300))

    argv = [*folio_argv("consume", "big", "--from-beginning", "--endpoint", server.address)]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          env=folio_env()) as interrupted:
        assert _read_line(interrupted, RUN_TIMEOUT_S) == payload + b"\n"
        interrupted.send_signal(signal.SIGINT)
        _, stderr = interrupted.communicate(timeout=RUN_TIMEOUT_S)
        assert (interrupted.returncode, stderr) == (0, b"")

    # 300 KB do not fit a pipe's buffer: consume is still writing when we close.
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          env=folio_env()) as piped:
        assert _read_line(piped, RUN_TIMEOUT_S) == payload + b"\n"
        assert piped.stdout is not None and piped.stderr is not None
        piped.stdout.close()
        assert piped.wait(RUN_TIMEOUT_S) == 0
        assert piped.stderr.read() == b""


def _perf_json(result: subprocess.CompletedProcess[bytes]) -> dict[str, object]:
    stdout = ok(result)
    assert stdout.count("\n") == 1, stdout
    report: dict[str, object] = json.loads(stdout)
    return report


def test_perf_produce_then_consume_report_json(server: BookieProcess) -> None:
    produced = folio(server, "perf", "produce", "--topic", "perf", "--duration-s", "1",
                     "--json")
    report = _perf_json(produced)
    assert "created it with 1 segment" in produced.stderr.decode()
    assert {"events_per_s", "mb_per_s", "latency_ms", "events", "bytes", "duration_s",
            "event_bytes", "writers", "errors"} <= set(report)
    assert isinstance(report["events_per_s"], float) and report["events_per_s"] > 0
    assert isinstance(report["mb_per_s"], float) and report["mb_per_s"] > 0
    latency = report["latency_ms"]
    assert isinstance(latency, dict) and set(latency) == LATENCY_KEYS
    assert all(isinstance(value, float) and value > 0 for value in latency.values())
    assert (report["errors"], report["writers"], report["event_bytes"]) == (0, 1, 100)
    events = report["events"]
    assert isinstance(events, int) and events > 0
    assert report["bytes"] == events * 100

    consumed = _perf_json(folio(server, "perf", "consume", "--topic", "perf",
                                "--from-beginning", "--max-events", str(events), "--json"))
    assert consumed["events"] == events and consumed["bytes"] == events * 100
    assert isinstance(consumed["events_per_s"], float) and consumed["events_per_s"] > 0
    assert isinstance(consumed["mb_per_s"], float) and consumed["mb_per_s"] > 0
    # From earliest, now - send time is the data's age, not end-to-end latency.
    data_age = consumed["data_age_ms"]
    assert isinstance(data_age, dict) and data_age["p50"] is not None
    assert "end_to_end_latency_ms" not in consumed


def test_perf_produce_with_two_writer_processes(server: BookieProcess) -> None:
    ok(folio(server, "topic", "create", "perf2", "--segments", "2"))
    produced = folio(server, "perf", "produce", "--topic", "perf2", "--duration-s", "1",
                     "--writers", "2", "--rate", "2000", "--json")
    report = _perf_json(produced)
    assert report["writers"] == 2 and report["errors"] == 0
    events = report["events"]
    assert isinstance(events, int) and 0 < events <= 2000 * 1.5
    described = json.loads(ok(folio(server, "topic", "describe", "perf2", "--json")))
    assert sum(s["end_offset"] for s in described["segments"]) > 0


def test_perf_produce_human_report_with_progress(server: BookieProcess) -> None:
    produced = folio(server, "perf", "produce", "--topic", "perf3", "--duration-s", "2.5",
                     "--rate", "1000", "--event-bytes", "4")
    text = ok(produced)
    assert "events/s" in text and "publish latency (ms): p50" in text
    progress = [line for line in produced.stderr.decode().splitlines() if "events sent" in line]
    assert len(progress) >= 2

