"""The click-count pipeline: JSON click events -> Spark structured streaming -> counts.

One command (with a broker running, e.g. ``make run``)::

    .venv/bin/python -m examples.clickcount --endpoint localhost:7070

1. generates ``--events`` JSON click events ``{"page": ..., "user": ..., "ts": ms}``
   into the topic ``<--clicks>-<run id>`` (routing key: the user), spread over
   ``--seconds`` of event time;
2. runs a Spark structured-streaming job (local Spark, ``availableNow``)
   that reads them with the ``folio`` data source, counts clicks per page per
   10-second window, and writes each count as JSON to the topic
   ``<--counts>-<run id>`` (routing key: page and window), exactly once;
3. reads the counts back, prints them (one JSON object per line) and checks
   them against the clicks it generated: exit 0 when they are right, 1 (with
   the differences on stderr) when they are not.

Each run gets its own topics (the run id is new each time unless
``--run-id`` is given), so running the example twice on one broker gives the
right counts twice; giving an earlier run's id reuses its topics, whose
clicks then count twice, and the check says so.

The job runs in ``append`` mode with a watermark: a window's count is written
once, final, when the watermark (the newest event time seen) passes the
window's end. So the generator ends with one click on the page ``/_end``
``CLOSE_MS`` after the span, which closes every window before it (its own
window stays open, and uncounted, until later clicks close it).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import uuid
from collections import Counter
from collections.abc import Sequence
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as f

import folio
import folio.spark

#: Pages the generator picks from.
PAGES = ("/", "/pricing", "/docs", "/blog", "/signup")
#: Event time of the first click, ms since the epoch (fixed, so windows are reproducible).
BASE_MS = 1_700_000_000_000
WINDOW = "10 seconds"
#: The closing click comes this long after the span.
CLOSE_MS = 20_000


def clicks(count: int, seconds: int, seed: int) -> list[dict[str, Any]]:
    """``count`` click events over ``seconds`` of event time, the same for the same seed."""
    rng = random.Random(seed)
    events = [{"page": rng.choice(PAGES), "user": f"user-{rng.randrange(50)}",
               "ts": BASE_MS + rng.randrange(seconds * 1000)} for _ in range(count)]
    return [*events, {"page": "/_end", "user": "clock", "ts": BASE_MS + seconds * 1000 + CLOSE_MS}]


def expected_counts(events: Sequence[dict[str, Any]]) -> Counter[tuple[str, int]]:
    """Clicks per (page, window start in ms) of the windows the last click closes."""
    watermark = max(e["ts"] for e in events)
    return Counter((e["page"], e["ts"] - e["ts"] % 10_000) for e in events
                   if e["ts"] - e["ts"] % 10_000 + 10_000 <= watermark)


def read_counts(client: folio.Client, topic: str, windows: int,
                timeout_s: float = 30.0) -> Counter[tuple[str, int]]:
    """The counts in ``topic`` (printed as read), once ``windows`` arrived or ``timeout_s`` passed.

    Reads a little past ``windows`` (an extra count would be wrong too).
    """
    got: Counter[tuple[str, int]] = Counter()
    with client.reader(topic, serializer=folio.JsonSerializer()) as reader:
        seen = 0
        while True:
            event = reader.read_next(timeout=timeout_s if seen < windows else 1.0)
            if event is None:
                return got
            row = event.payload
            print(json.dumps(row, sort_keys=True), flush=True)
            got[(row["page"], row["window_ms"])] += row["count"]
            seen += 1


def check_counts(expected: Counter[tuple[str, int]], got: Counter[tuple[str, int]]) -> list[str]:
    """What differs between the counts expected and those read; empty when they are right."""
    return [f"page {page!r} window {window_ms}: expected {expected[(page, window_ms)]}, "
            f"got {got[(page, window_ms)]}"
            for page, window_ms in sorted(set(expected) | set(got))
            if expected[(page, window_ms)] != got[(page, window_ms)]]


def produce(client: folio.Client, topic: str, events: Sequence[dict[str, Any]]) -> None:
    """Writes the events as JSON, keyed by user."""
    with client.writer(topic, folio.JsonSerializer()) as writer:
        for event in events:
            writer.write_event(event, routing_key=event["user"])


def run_job(spark: Any, endpoint: str, clicks_topic: str, counts_topic: str,
            checkpoint: str) -> None:
    """The streaming job, run until it has read everything there is now (``availableNow``)."""
    schema = "page string, user string, ts long"
    counts = (spark.readStream.format("folio").option("endpoint", endpoint)
              .option("topic", clicks_topic).load()
              .select(f.from_json(f.col("payload").cast("string"), schema).alias("click"))
              .select("click.page",
                      (f.col("click.ts") / 1000).cast("timestamp").alias("time"))
              .withWatermark("time", "0 seconds")
              .groupBy(f.window("time", WINDOW), "page").count()
              .select(f.concat_ws("|", "page", f.col("window.start").cast("long"))
                      .alias("routing_key"),
                      f.to_json(f.struct(
                          "page", (f.col("window.start").cast("long") * 1000).alias("window_ms"),
                          "count")).alias("payload")))
    query = (counts.writeStream.format("folio").option("endpoint", endpoint)
             .option("topic", counts_topic).option("checkpointLocation", checkpoint)
             .outputMode("append").trigger(availableNow=True).start())
    query.awaitTermination()


def spark_session() -> Any:
    """A local Spark session (2 threads, UI off) with the ``folio`` data source."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (SparkSession.builder.master("local[2]").appName("folio-clickcount")
             .config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    folio.spark.register(spark)
    return spark


def main(argv: Sequence[str] | None = None) -> int:
    """Generate, count, print. Exit code 0 when the counts are right."""
    parser = argparse.ArgumentParser(prog="python -m examples.clickcount",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--endpoint", default=None,
                        help="the broker (default $FOLIO_ENDPOINT, else localhost:7070)")
    parser.add_argument("--clicks", default="clicks",
                        help="topic of the click events, before '-<run id>' (default clicks)")
    parser.add_argument("--counts", default="page-counts",
                        help="topic of the counts, before '-<run id>' (default page-counts)")
    parser.add_argument("--run-id", default=None,
                        help="names this run's topics (default: a new random id; an earlier "
                             "run's id reuses its topics and clicks)")
    parser.add_argument("--events", type=int, default=2000, help="how many clicks")
    parser.add_argument("--seconds", type=int, default=60, help="event time they span")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--checkpoint", default=None,
                        help="the job's checkpoint directory (default: a new temporary one)")
    args = parser.parse_args(argv)
    run_id = args.run_id or uuid.uuid4().hex[:8]
    clicks_topic, counts_topic = f"{args.clicks}-{run_id}", f"{args.counts}-{run_id}"
    print(f"run {run_id}: topics {clicks_topic!r} and {counts_topic!r}", flush=True)
    events = clicks(args.events, args.seconds, args.seed)
    with folio.Client(args.endpoint) as client:
        for topic, segments in ((clicks_topic, 3), (counts_topic, 2)):
            try:
                client.create_topic(topic, segments=segments)
            except folio.TopicExistsError:
                print(f"topic {topic!r} exists (run id {run_id!r} was used before): "
                      "its earlier events count too", file=sys.stderr, flush=True)
        produce(client, clicks_topic, events)
        endpoint = client.endpoint
    spark = spark_session()
    try:
        checkpoint = args.checkpoint or tempfile.mkdtemp(prefix="clickcount-")
        run_job(spark, endpoint, clicks_topic, counts_topic, checkpoint)
    finally:
        spark.stop()
    expected = expected_counts(events)
    print(f"counted {len(events)} clicks into {len(expected)} (page, 10 s window) counts "
          f"in topic {counts_topic!r}:", flush=True)
    with folio.Client(endpoint) as client:
        wrong = check_counts(expected, read_counts(client, counts_topic, len(expected)))
    for line in wrong:
        print(f"wrong count: {line}", file=sys.stderr)
    if wrong:
        print(f"clickcount: {len(wrong)} of the counts are wrong", file=sys.stderr)
        return 1
    print(f"all {len(expected)} counts are right", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
