"""The CLI a Kafka or Pulsar user expects (issue 13, section 4), against a real standalone.

Every command runs as a real ``folio`` subprocess against the module's
``folio standalone``; the signal tests send real SIGINT/SIGTERM to a running
``folio produce``/``consume``/``perf`` and check exit code and summary.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time

import pytest

import folio
from folio.errors import TopicExistsError
from tests.support.bookies import BookieProcess, folio_argv, folio_env
from tests.support.wait import wait_for
from tests.support.zookeeper import free_port

RUN_TIMEOUT_S = 60.0


def run(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    """``folio ARGS`` to completion (the endpoint is among ARGS, wherever the test puts it)."""
    return subprocess.run(folio_argv(*args), input=stdin, capture_output=True,
                          env=folio_env(), timeout=RUN_TIMEOUT_S, check=False)


def ok(result: subprocess.CompletedProcess[bytes]) -> str:
    assert result.returncode == 0, (result.stdout, result.stderr)
    return result.stdout.decode(errors="replace")  # (binary payloads: U+FFFD)


def error_line(result: subprocess.CompletedProcess[bytes], prog: str) -> str:
    assert result.returncode == 1, (result.stdout, result.stderr)
    lines = result.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{prog}: error: "), lines
    return lines[0]


def test_version_and_endpoint_before_or_after_and_bootstrap(server: BookieProcess) -> None:
    assert ok(run("--version")).startswith("folio ")
    at = server.address
    ok(run("--endpoint", at, "topic", "create", "k-opts"))
    before = json.loads(ok(run("--endpoint", at, "topic", "list", "--json")))
    after = json.loads(ok(run("topic", "list", "--endpoint", at, "--json")))
    assert before == after
    listed = next(topic for topic in before if topic["name"] == "k-opts")
    assert listed["segments"][0]["name"] == "k-opts/0"
    assert not any(topic["name"].startswith("_") for topic in before)
    dead = f"127.0.0.1:{free_port()}"
    assert "k-opts\t1" in ok(run("--bootstrap", f"{dead},{at}", "topic", "list")).splitlines()
    assert "k-opts\t1" in ok(run("topic", "list", "--bootstrap", f"{dead},{at}")).splitlines()
    refused = error_line(run("topic", "list", "--bootstrap", dead), "folio topic list")
    assert f"no broker at {dead}" in refused


def test_create_if_not_exists_cli_and_sdk(server: BookieProcess, client: folio.Client) -> None:
    at = server.address
    first = ok(run("topic", "create", "k-twice", "--segments", "2", "--if-not-exists",
                   "--endpoint", at))
    assert first.startswith("created topic k-twice with 2 segments")
    again = ok(run("topic", "create", "k-twice", "--segments", "5", "--if-not-exists",
                   "--endpoint", at))
    assert again == "topic k-twice exists already (2 open segments); left as it is\n"
    assert "exists" in error_line(run("topic", "create", "k-twice", "--endpoint", at),
                                  "folio topic create")

    made = client.create_topic("k-sdk", 2, exist_ok=True)
    found = client.create_topic("k-sdk", 3, retention_ms=1000, exist_ok=True)
    assert found == made and len(found.segments) == 2  # as it was, not changed
    with pytest.raises(TopicExistsError):
        client.create_topic("k-sdk", 2)


def test_produce_keys_and_headers_then_consume_print_and_json(server: BookieProcess) -> None:
    at = server.address
    ok(run("topic", "create", "k-lines", "--segments", "2", "--endpoint", at))
    produced = run("produce", "k-lines", "--key-separator", ":", "--header", "app=cli",
                   "--header", "v=1", "--endpoint", at,
                   stdin=b"alice:a1\nbob:b1\nalice:a2:with colon\n")
    assert ok(produced) == "" and produced.stderr == b"3 events acknowledged\n"
    json_lines = (b'{"key": "carol", "payload": "c1", "headers": {"v": "2"}}\n'
                  b'{"key": "carol", "payload_base64": "AP8="}\n')
    assert run("--endpoint", at, "produce", "k-lines", "--json",
               stdin=json_lines).stderr == b"2 events acknowledged\n"

    printed = ok(run("consume", "k-lines", "--from-beginning", "--max-events", "5",
                     "--print", "key,offset,headers", "--endpoint", at)).splitlines()
    by_key: dict[str, list[list[str]]] = {}
    for line in printed:
        key, offset, headers, payload = line.split("\t")
        by_key.setdefault(key, []).append([offset, headers, payload])
    assert [p for _, _, p in by_key["alice"]] == ["a1", "a2:with colon"]
    assert by_key["bob"] == [[by_key["bob"][0][0], "app=cli,v=1", "b1"]]
    assert by_key["carol"][0][1:] == ["v=2", "c1"]
    assert by_key["carol"][1][1:] == ["NO_HEADERS", "\x00\ufffd"]

    events = [json.loads(line) for line in ok(run(
        "consume", "k-lines", "--from-beginning", "--max-events", "5", "--json",
        "--endpoint", at)).splitlines()]
    carol = [event for event in events if event["key"] == "carol"]
    assert [(e["payload"], e["encoding"]) for e in carol] == [("c1", "utf-8"),
                                                              ("AP8=", "base64")]
    assert carol[1]["offset"] == carol[0]["offset"] + 1
    assert carol[0]["segment"].startswith("k-lines/")
    assert all(isinstance(event["timestamp"], int) and event["timestamp"] > 0
               for event in events)

    # What consume --json prints, produce --json writes again: the same events.
    ok(run("topic", "create", "k-copy", "--endpoint", at))
    copied = "".join(json.dumps(event) + "\n" for event in events).encode()
    assert run("produce", "k-copy", "--json", "--endpoint", at,
               stdin=copied).stderr == b"5 events acknowledged\n"
    again = [json.loads(line) for line in ok(run(
        "consume", "k-copy", "--from-beginning", "--max-events", "5", "--json",
        "--endpoint", at)).splitlines()]
    def kept(event: dict[str, object]) -> str:
        return json.dumps([event[f] for f in ("key", "headers", "payload", "encoding")])

    assert sorted(map(kept, again)) == sorted(map(kept, events))


def test_a_refused_line_says_its_number(server: BookieProcess) -> None:
    at = server.address
    ok(run("topic", "create", "k-refused", "--endpoint", at))
    refused = run("produce", "k-refused", "--key-separator", "=", "--endpoint", at,
                  stdin=b"a=1\nb=2\nno separator here\nc=3\n")
    assert error_line(refused, "folio produce") == (
        "folio produce: error: line 3: no key separator '=' (2 of 2 events acknowledged)")
    bad_json = run("produce", "k-refused", "--json", "--endpoint", at,
                   stdin=b'{"payload": "x"}\n{"payload": 1}\n')
    assert "line 2: the payload must be a JSON string" in error_line(bad_json, "folio produce")
    ok(run("topic", "alter", "k-refused", "--max-event-bytes", "10", "--endpoint", at))
    too_large = run("produce", "k-refused", "--endpoint", at, stdin=b"short\n" + b"x" * 11)
    assert "line 2: an event of 11 bytes exceeds" in error_line(too_large, "folio produce")
    assert ok(run("consume", "k-refused", "--from-beginning", "--timeout-ms", "300",
                  "--endpoint", at)) == "1\n2\nx\nshort\n"


def _segments(at: str, topic: str) -> list[dict[str, object]]:
    described = json.loads(ok(run("topic", "describe", topic, "--json", "--endpoint", at)))
    segments: list[dict[str, object]] = described["segments"]
    return segments


def test_alter_truncate_describe_exact_ranges_split_merge(server: BookieProcess) -> None:
    at = server.address
    ok(run("topic", "create", "k-admin", "--endpoint", at))
    altered = ok(run("topic", "alter", "k-admin", "--retention-ms", "3600000",
                     "--ledger-rollover-bytes", "1024", "--endpoint", at))
    assert altered == "altered topic k-admin: retention_ms 3600000, ledger_rollover_bytes 1024\n"
    for digit in "1234":  # one 1100-byte block per run: a ledger each
        ok(run("produce", "k-admin", "--endpoint", at, stdin=digit.encode() * 1100))
    truncated = ok(run("topic", "truncate", "k-admin", "--segment", "0", "--before", "2",
                       "--endpoint", at))
    assert truncated == ("truncated segment k-admin/0 before offset 2: start offset now 2, "
                         "end offset 4\n")
    left = ok(run("consume", "k-admin", "--from-beginning", "--timeout-ms", "300",
                  "--endpoint", at)).split()
    assert [line[0] for line in left] == ["3", "4"]
    beyond = run("topic", "truncate", "k-admin", "--segment", "0", "--before", "9",
                 "--endpoint", at)
    assert "after its end offset 4" in error_line(beyond, "folio topic truncate")

    split = ok(run("topic", "scale", "k-admin", "--split", "0", "--parts", "3",
                   "--endpoint", at))
    assert "[0.0, 0.3333333333333333)" in split and "[0.6666666666666666, 1.0)" in split
    human = ok(run("topic", "describe", "k-admin", "--endpoint", at))
    assert "[0.3333333333333333, 0.6666666666666666)" in human
    merged = ok(run("topic", "scale", "k-admin", "--merge", "1,2", "--endpoint", at))
    assert "sealed 2, created 1" in merged and "[0.0, 0.6666666666666666)" in merged
    not_neighbours = run("topic", "scale", "k-admin", "--merge", "k-admin/3,1",
                         "--endpoint", at)
    assert "not an open segment" in error_line(not_neighbours, "folio topic scale")
    # A range copied from describe's output is the broker's range to the bit.
    ok(run("topic", "scale", "k-admin", "--seal", "3",
           "--ranges", "0.6666666666666666-0.9,0.9-1.0", "--endpoint", at))
    ranges = [(s["key_low"], s["key_high"]) for s in _segments(at, "k-admin")
              if s["state"] == "open"]
    assert ranges == [(0.0, 2 / 3), (2 / 3, 0.9), (0.9, 1.0)]


def test_consume_from_offset_and_from_time(server: BookieProcess,
                                           client: folio.Client) -> None:
    at = server.address
    ok(run("topic", "create", "k-start", "--segments", "2", "--endpoint", at))
    with client.writer("k-start") as writer:
        for index in range(6):
            writer.write_event(f"old-{index}".encode(), routing_key=f"key-{index}")
    boundary_ms = time.time_ns() // 1_000_000 + 1
    wait_for(lambda: time.time_ns() // 1_000_000 > boundary_ms, "the clock to pass", 5)
    with client.writer("k-start") as writer:
        for index in range(4):
            writer.write_event(f"new-{index}".encode(), routing_key=f"key-{index % 3}")

    def consume(*args: str) -> list[str]:
        return ok(run("consume", "k-start", "--timeout-ms", "500", "--print",
                      "segment,offset", *args, "--endpoint", at)).splitlines()

    from_time = consume("--from-time", str(boundary_ms))
    assert sorted(line.split("\t")[2] for line in from_time) == [f"new-{i}" for i in range(4)]
    iso = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(boundary_ms // 1000 - 3600))
    assert len(consume("--from-time", iso)) == 10

    first = from_time[0].split("\t")
    one = consume("--from-offset", f"{first[0]}:{first[1]}")
    named = [line for line in one if line.startswith(first[0] + "\t")]
    assert named == [line for line in from_time if line.startswith(first[0] + "\t")]
    # The segment not named is read from its first event (as the SDK's start mapping).
    other = "1" if first[0] == "0" else "0"
    assert next(line for line in one if line.startswith(other + "\t")).startswith(
        f"{other}\t0\t")
    both = consume("--from-offset", f"{first[0]}:{first[1]}", "--from-beginning")
    assert sorted(both) == sorted(one)

    # After a split the search goes on into the successors, in order.
    client.scale_topic("k-start", ["k-start/0"], [(0.0, 0.25), (0.25, 0.5)])
    with client.writer("k-start") as writer:
        for index in range(3):
            writer.write_event(f"last-{index}".encode(), routing_key=f"key-{index}")
    after = consume("--from-time", str(boundary_ms))
    assert sorted(line.split("\t")[2] for line in after) == sorted(
        [f"new-{i}" for i in range(4)] + [f"last-{i}" for i in range(3)])
    # From a sealed segment: it, then its successors whole; segment 1 from its first event.
    in_sealed = [line.split("\t")[0] for line in consume("--from-offset", "0:0")]
    every = [line.split("\t")[0] for line in consume("--from-beginning")]
    assert sorted(in_sealed) == sorted(every)
    zeros = [i for i, name in enumerate(in_sealed) if name == "0"]
    successors = [i for i, name in enumerate(in_sealed) if name in {"2", "3"}]
    assert zeros and successors and max(zeros) < min(successors)
    unknown = run("consume", "k-start", "--from-offset", "9:0", "--endpoint", at)
    assert "has no segment '9'" in error_line(unknown, "folio consume")


def _popen(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(folio_argv(*args), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=folio_env())


def _end_offsets(client: folio.Client, topic: str) -> int:
    return sum(s.end_offset for s in client.get_segments(topic))


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_produce_after_acknowledgement_exits_0_with_the_summary(
        server: BookieProcess, client: folio.Client, signum: int) -> None:
    topic = f"k-sig-{signum}"
    client.create_topic(topic)
    with _popen("produce", topic, "--endpoint", server.address) as producing:
        assert producing.stdin is not None
        producing.stdin.write(b"one\ntwo\nthree\n")
        producing.stdin.flush()  # stdin stays open: produce waits for more
        wait_for(lambda: _end_offsets(client, topic) == 3, "3 events acknowledged",
                 RUN_TIMEOUT_S)
        producing.send_signal(signum)
        stdout, stderr = producing.communicate(timeout=RUN_TIMEOUT_S)
    assert (producing.returncode, stdout, stderr) == (
        0, b"", b"3 events acknowledged (interrupted)\n")


def _wait_for_line(process: subprocess.Popen[bytes], stream_name: str) -> bytes:
    stream = getattr(process, stream_name)
    line: bytes = stream.readline()
    assert line, "the process ended before printing"
    return line


def test_sigterm_stops_consume_and_perf_as_ctrl_c_does(server: BookieProcess,
                                                        client: folio.Client) -> None:
    at = server.address
    client.create_topic("k-term")
    with client.writer("k-term") as writer:
        writer.write_event(b"only")
    with _popen("consume", "k-term", "--from-beginning", "--endpoint", at) as consuming:
        assert _wait_for_line(consuming, "stdout") == b"only\n"
        consuming.send_signal(signal.SIGTERM)
        _, stderr = consuming.communicate(timeout=RUN_TIMEOUT_S)
    assert (consuming.returncode, stderr) == (0, b"")

    with _popen("perf", "produce", "--topic", "k-term", "--duration-s", "120", "--rate", "200",
                "--endpoint", at) as perf:
        assert b"events sent" in _wait_for_line(perf, "stderr")
        perf.send_signal(signal.SIGTERM)
        stdout, _ = perf.communicate(timeout=RUN_TIMEOUT_S)
    assert perf.returncode == 0
    assert "publish latency (ms): p50" in stdout.decode() and "0 errors" in stdout.decode()

    with _popen("perf", "consume", "--topic", "k-term", "--timeout-ms", "0",
                "--endpoint", at) as reading:
        assert b"events read" in _wait_for_line(reading, "stderr")
        reading.send_signal(signal.SIGTERM)
        stdout, _ = reading.communicate(timeout=RUN_TIMEOUT_S)
    assert reading.returncode == 0 and "(stopped by interrupted)" in stdout.decode()


def test_perf_consume_from_earliest_reports_data_age(server: BookieProcess) -> None:
    at = server.address
    report = json.loads(ok(run("perf", "produce", "--topic", "k-age", "--duration-s", "0.5",
                               "--rate", "500", "--json", "--endpoint", at)))
    events = str(report["events"])
    earliest = json.loads(ok(run("perf", "consume", "--topic", "k-age", "--from", "earliest",
                                 "--max-events", events, "--json", "--endpoint", at)))
    assert "end_to_end_latency_ms" not in earliest
    assert earliest["data_age_ms"]["p50"] is not None
    assert earliest["events"] == report["events"]
    human = ok(run("perf", "consume", "--topic", "k-age", "--from-beginning", "--read-next",
                   "--max-events", events, "--endpoint", at))
    assert "data age (ms): p50" in human and "end-to-end" not in human
    assert f"from earliest: {report['events']:,} events" in human



def test_from_time_does_not_wait_on_an_open_transaction(server: BookieProcess,
                                                        client: folio.Client) -> None:
    at = server.address
    client.create_topic("k-open-txn")
    with client.writer("k-open-txn") as writer:
        for index in range(5):
            writer.write_event(f"before-{index}".encode())
    with client.transactional_writer("k-open-txn") as transactional:
        txn = transactional.begin()
        for index in range(5):
            txn.write_event(f"in-txn-{index}".encode())
        txn.flush()  # written in place, not committed: read_committed stops before them
        started_ms = time.time_ns() // 1_000_000
        printed = ok(run("consume", "k-open-txn", "--from-time", "2000-01-01T00:00:00Z",
                         "--timeout-ms", "500", "--endpoint", at))
        assert printed.splitlines() == [f"before-{index}" for index in range(5)]
        later = ok(run("consume", "k-open-txn", "--from-time", str(started_ms + 60_000),
                       "--timeout-ms", "500", "--endpoint", at))
        assert later == ""
        txn.abort()
