"""Kafka clients against the Folio SDK on one ``folio standalone``: ``python -m bench.kafka``.

One run starts a ``folio standalone --kafka-port 0`` (sync durability) in a
fresh directory and, for each event size (default 100 B and 1 KiB), measures
on a fresh 1-segment topic each:

* **produce**: events acknowledged per second, writing as fast as the
  client allows for ``--duration-s``: the SDK's ``EventWriter`` (default
  settings) and librdkafka's producer (confluent-kafka, ``acks=all``,
  ``linger.ms=5``, no compression, delivery reports for failures only), each
  into its own topic;
* **consume**: events per second reading back from offset 0 everything that
  produce wrote: the SDK's batch client (``read_segment``) and librdkafka's
  consumer (``assign`` + ``consume``, with a prefetch queue of a million
  messages or 1 GiB instead of 100,000 or 64 MiB), each
  reading the events its own API wrote (so the Kafka path serves batches as
  stored).

Each measurement runs ``--rounds`` times (default 3) and the best is kept:
the machine is shared, and the best run is the one least disturbed. It
prints a Markdown table with both rates and the Kafka/SDK ratio (the target:
the Kafka path at least half the SDK's) and, with ``--json``, the figures as
JSON. Clients run one at a time in this process, the broker in its
own; the machine's cores are shared by both.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["main"]

_KAFKA = re.compile(r"kafka on (\S+):(\d+)\)")


def _start(directory: Path) -> tuple[subprocess.Popen[str], str, str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "folio.cli", "standalone", "--data-dir", str(directory),
         "--port", "0", "--metrics-port", "0", "--kafka-port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert process.stdout is not None
    line = process.stdout.readline()
    match = _KAFKA.search(line)
    if "listening on " not in line or match is None:
        process.kill()
        process.wait()
        raise RuntimeError(f"folio standalone did not start: {line!r}")
    return process, line.split("listening on ", 1)[1].split()[0], f"{match[1]}:{match[2]}"


def sdk_produce(endpoint: str, topic: str, size: int, duration_s: float) -> tuple[float, int]:
    """(events/s, events) acknowledged by an SDK writer in ``duration_s``."""
    import folio  # noqa: PLC0415

    payload = os.urandom(size)
    with folio.Client(endpoint) as client:
        client.create_topic(topic, 1)
        with client.writer(topic) as writer:
            write = writer.write_event
            count = 0
            started = time.perf_counter()
            deadline = started + duration_s
            last: Any = None
            while time.perf_counter() < deadline:
                for _ in range(1000):
                    last = write(payload)
                count += 1000
            writer.flush()
            last.result(60)
            elapsed = time.perf_counter() - started
    return count / elapsed, count


def sdk_consume(endpoint: str, topic: str, count: int) -> float:
    """Events/s reading ``count`` events of ``topic/0`` with the SDK's batch client."""
    import folio  # noqa: PLC0415

    with folio.Client(endpoint) as client:
        started = time.perf_counter()
        read = sum(1 for _ in client.batch_client().read_segment(f"{topic}/0", 0, count))
        elapsed = time.perf_counter() - started
    assert read == count, (read, count)
    return count / elapsed


def kafka_produce(bootstrap: str, topic: str, size: int, duration_s: float,
                  settings: dict[str, Any] | None = None) -> tuple[float, int]:
    """(events/s, events) acknowledged by librdkafka's producer in ``duration_s``.

    ``settings``: more client settings (security: ``bench._kafka_secured``).
    """
    from confluent_kafka import Producer  # noqa: PLC0415
    from confluent_kafka.admin import (  # noqa: PLC0415
        AdminClient,
        NewTopic,
    )

    extra = settings or {}
    admin = AdminClient({"bootstrap.servers": bootstrap, **extra})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[
        topic].result(60)
    payload = os.urandom(size)
    failures: list[Any] = []

    def report(error: Any, _message: Any) -> None:
        if error is not None:
            failures.append(error)

    # Delivery reports for failures only: a report per event would measure
    # Python callbacks, not the path (failures are still counted).
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         "delivery.report.only.error": True,
                         "queue.buffering.max.messages": 1_000_000,
                         "queue.buffering.max.kbytes": 1_048_576, **extra})
    count = 0
    started = time.perf_counter()
    deadline = started + duration_s
    produce = producer.produce
    while time.perf_counter() < deadline:
        for _ in range(1000):
            while True:
                try:
                    produce(topic, payload, partition=0, on_delivery=report)
                    break
                except BufferError:  # its queue is full: serve delivery reports
                    producer.poll(0.01)
        count += 1000
        producer.poll(0)
    if producer.flush(120) != 0 or failures:
        raise RuntimeError(f"librdkafka: {len(failures)} failed deliveries: {failures[:3]}")
    elapsed = time.perf_counter() - started
    return count / elapsed, count


def kafka_consume(bootstrap: str, topic: str, count: int,
                  settings: dict[str, Any] | None = None) -> float:
    """Events/s reading ``count`` events of partition 0 with librdkafka's consumer."""
    from confluent_kafka import Consumer, TopicPartition  # noqa: PLC0415

    # librdkafka stops fetching once 100,000 messages or 64 MiB wait in its
    # queue and backs off up to fetch.queue.backoff.ms (1 s) before the next
    # fetch: the consumer then idles (measured: both processes mostly idle). A
    # queue of a million messages or 1 GiB keeps fetches going, as the SDK's
    # read stream does.
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench",
                         "enable.auto.commit": False, "queued.min.messages": 1_000_000,
                         "queued.max.messages.kbytes": 1_048_576, **(settings or {})})
    consumer.assign([TopicPartition(topic, 0, 0)])
    read = 0
    started = time.perf_counter()
    try:
        while read < count:
            # consume() waits for as many messages as asked (or its timeout):
            # never ask for more than are left.
            for message in consumer.consume(min(10_000, count - read), 1.0):
                if message.error() is None:
                    read += 1
        elapsed = time.perf_counter() - started
    finally:
        consumer.close()
    return count / elapsed


def _broker_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) the broker process has used (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(sizes: list[int], duration_s: float, rounds: int) -> list[dict[str, Any]]:
    """Every figure, by event size: the best of ``rounds`` runs of each measurement.

    Rates are events per second (the best run); ``*_broker_us_per_event`` is the
    broker's CPU time per event (the lowest run): it depends far less on
    what else the shared machine runs than a rate does.
    """
    results = []
    with tempfile.TemporaryDirectory(prefix="folio-kafka-bench-") as directory:
        process, endpoint, bootstrap = _start(Path(directory) / "data")
        pid = process.pid

        def timed(step: Any, *args: Any) -> tuple[Any, float]:
            before = _broker_cpu_s(pid)
            value = step(*args)
            return value, _broker_cpu_s(pid) - before

        try:
            for size in sizes:
                best: dict[str, float] = {}
                for number in range(rounds):
                    sdk_topic, kafka_topic = f"sdk-{size}-{number}", f"kafka-{size}-{number}"
                    (sdk_rate, sdk_count), sdk_cpu = timed(sdk_produce, endpoint, sdk_topic,
                                                           size, duration_s)
                    (kafka_rate, kafka_count), kafka_cpu = timed(
                        kafka_produce, bootstrap, kafka_topic, size, duration_s)
                    sdk_read, sdk_read_cpu = timed(sdk_consume, endpoint, sdk_topic, sdk_count)
                    kafka_read, kafka_read_cpu = timed(kafka_consume, bootstrap, kafka_topic,
                                                       kafka_count)
                    rates = {
                        "sdk_produce_events_per_s": sdk_rate,
                        "kafka_produce_events_per_s": kafka_rate,
                        "sdk_consume_events_per_s": sdk_read,
                        "kafka_consume_events_per_s": kafka_read,
                    }
                    costs = {
                        "sdk_produce_broker_us_per_event": sdk_cpu / sdk_count * 1e6,
                        "kafka_produce_broker_us_per_event": kafka_cpu / kafka_count * 1e6,
                        "sdk_consume_broker_us_per_event": sdk_read_cpu / sdk_count * 1e6,
                        "kafka_consume_broker_us_per_event":
                            kafka_read_cpu / kafka_count * 1e6,
                    }
                    for name, value in rates.items():
                        best[name] = max(best.get(name, 0.0), value)
                    for name, value in costs.items():
                        best[name] = min(best.get(name, float("inf")), value)
                results.append({"size_bytes": size, "rounds": rounds, **best})
        finally:
            process.terminate()
            process.wait(60)
    return results


def table(results: list[dict[str, Any]]) -> str:
    """The figures as a Markdown table."""
    lines = ["| event size | produce: SDK | produce: Kafka | Kafka/SDK | consume: SDK "
             "| consume: Kafka | Kafka/SDK |", "|---|---|---|---|---|---|---|"]
    for row in results:
        produce = row["kafka_produce_events_per_s"] / row["sdk_produce_events_per_s"]
        consume = row["kafka_consume_events_per_s"] / row["sdk_consume_events_per_s"]
        lines.append(
            f"| {row['size_bytes']} B | {row['sdk_produce_events_per_s']:,.0f}/s "
            f"| {row['kafka_produce_events_per_s']:,.0f}/s | {produce:.2f} "
            f"| {row['sdk_consume_events_per_s']:,.0f}/s "
            f"| {row['kafka_consume_events_per_s']:,.0f}/s | {consume:.2f} |")
    lines += ["", "Broker CPU per event (the lowest run):", "",
              "| event size | produce: SDK | produce: Kafka | consume: SDK | consume: Kafka |",
              "|---|---|---|---|---|"]
    for row in results:
        lines.append(
            f"| {row['size_bytes']} B | {row['sdk_produce_broker_us_per_event']:.2f} us "
            f"| {row['kafka_produce_broker_us_per_event']:.2f} us "
            f"| {row['sdk_consume_broker_us_per_event']:.2f} us "
            f"| {row['kafka_consume_broker_us_per_event']:.2f} us |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its table (or JSON)."""
    parser = argparse.ArgumentParser(prog="python -m bench.kafka", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="100,1024",
                        help="event sizes in bytes, comma-separated (default 100,1024)")
    parser.add_argument("--duration-s", type=float, default=3.0,
                        help="seconds each producer writes (default 3)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="runs of each measurement; the best is reported, as the "
                        "machine is shared (default 3)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--security", action="store_true",
                        help="instead: librdkafka over SASL_SSL (TLS, SASL PLAIN with a token) "
                        "against PLAINTEXT, on two standalones, and their ratio "
                        "(bench._kafka_secured)")
    args = parser.parse_args(argv)
    sizes = [int(size) for size in args.sizes.split(",") if size.strip()]
    if args.security:
        from bench._kafka_secured import run_secured, secured_table  # noqa: PLC0415

        results = run_secured(sizes, args.duration_s, max(args.rounds, 1))
        print(json.dumps(results, indent=2) if args.json else secured_table(results))
        return 0
    results = run(sizes, args.duration_s, max(args.rounds, 1))
    print(json.dumps(results, indent=2) if args.json else table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
