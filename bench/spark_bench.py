"""Batch read of a topic through Spark local[2] versus one ``BatchClient`` process.

Loads ``--events`` events of ``--payload-bytes`` bytes into a topic of
``--segments`` segments on a fresh ``folio standalone`` (or ``--endpoint``),
then reads all of them:

- ``batch_client``: one process, ``client.batch_client()``, the slices one
  after another, counting events and payload bytes;
- ``spark``: ``spark.read.format("folio")`` on ``local[2]`` (2 task threads,
  each slice of at most ``--max-events-per-partition`` events one task),
  ``sum(length(payload))``, timed after a warm-up query (JVM start excluded).

Prints events/s of each. Usage: ``python -m bench.spark_bench [--events N]``
(the issue's figure is 10,000,000 events of 100 bytes in 8 segments).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import folio
import folio.spark
from bench._standalone import start_standalone


def load(client: folio.Client, topic: str, events: int, size: int, segments: int) -> float:
    """Writes the events (keyless: they rotate over the segments); seconds taken."""
    client.create_topic(topic, segments=segments)
    payload = b"x" * size
    started = time.perf_counter()
    with client.writer(topic, linger_ms=20, batch_size_bytes=1024 * 1024,
                       max_in_flight=16) as writer:
        write = writer.write_event
        for _ in range(events):
            write(payload)
        writer.flush()
    return time.perf_counter() - started


def read_batch_client(client: folio.Client, topic: str) -> tuple[int, int, float]:
    """Events, payload bytes and seconds of one BatchClient reading every slice."""
    batch = client.batch_client()
    started = time.perf_counter()
    count = total = 0
    for piece in batch.segments(topic):
        for event in batch.read_segment(piece):
            count += 1
            total += len(event.payload)
    return count, total, time.perf_counter() - started


def read_spark(endpoint: str, topic: str, max_events: int) -> tuple[int, int, float]:
    """Events, payload bytes and seconds of Spark local[2] reading the topic."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession  # noqa: PLC0415  # only when measuring Spark

    spark = (SparkSession.builder.master("local[2]").appName("folio-spark-bench")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    folio.spark.register(spark)
    try:
        def query() -> Any:
            return (spark.read.format("folio").option("endpoint", endpoint)
                    .option("topic", topic).option("maxEventsPerPartition", str(max_events))
                    .load().selectExpr("count(*) as n", "sum(length(payload)) as bytes"))

        query().limit(1).collect()  # warm-up: JVM, Python workers
        started = time.perf_counter()
        row = query().collect()[0]
        return int(row.n), int(row.bytes or 0), time.perf_counter() - started
    finally:
        spark.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--payload-bytes", type=int, default=100)
    parser.add_argument("--segments", type=int, default=8)
    parser.add_argument("--max-events-per-partition", type=int, default=500_000)
    parser.add_argument("--endpoint", default=None,
                        help="use this broker instead of starting a standalone")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    process = None
    with tempfile.TemporaryDirectory(prefix="folio-spark-bench-") as base:
        endpoint = args.endpoint
        if endpoint is None:
            process, endpoint = start_standalone(Path(base) / "data")
        try:
            with folio.Client(endpoint) as client:
                topic = f"spark-bench-{int(time.time())}"
                load_s = load(client, topic, args.events, args.payload_bytes, args.segments)
                b_events, b_bytes, b_s = read_batch_client(client, topic)
            s_events, s_bytes, s_s = read_spark(endpoint, topic, args.max_events_per_partition)
        finally:
            if process is not None:
                process.terminate()
                process.wait()
    expected = args.events * args.payload_bytes
    if (b_events, b_bytes, s_events, s_bytes) != (args.events, expected, args.events, expected):
        print(f"read mismatch: batch client {b_events}/{b_bytes}, spark {s_events}/{s_bytes}",
              file=sys.stderr)
        return 1
    report = {"events": args.events, "payload_bytes": args.payload_bytes,
              "segments": args.segments, "load_events_per_s": round(args.events / load_s),
              "batch_client_events_per_s": round(b_events / b_s),
              "spark_local2_events_per_s": round(s_events / s_s),
              "batch_client_s": round(b_s, 2), "spark_s": round(s_s, 2)}
    if args.json:
        print(json.dumps(report))
    else:
        for key, value in report.items():
            print(f"{key:28} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
