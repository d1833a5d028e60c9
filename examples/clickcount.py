"""The click-count pipeline: JSON click events -> Spark structured streaming -> counts.

One command (with a broker running, e.g. ``make run``)::

    .venv/bin/python -m examples.clickcount --endpoint localhost:7070

1. generates ``--events`` JSON click events ``{"page": ..., "user": ..., "ts": ms}``
   into the topic ``--clicks`` (routing key: the user), spread over
   ``--seconds`` of event time;
2. runs a Spark structured-streaming job (local Spark, ``availableNow``)
   that reads them with the ``folio`` data source, counts clicks per page per
   10-second window, and writes each count as JSON to the topic ``--counts``
   (routing key: page and window), exactly once;
3. prints the counts with ``folio consume --from-beginning``.

The job runs in ``append`` mode with a watermark: a window's count is written
once, final, when the watermark (the newest event time seen) passes the
window's end. So the generator ends with one click on the page ``/_end``
``CLOSE_MS`` after the span, which closes every window before it (its own
window stays open, and uncounted, until later clicks close it).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import subprocess
import sys
import tempfile
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
    parser.add_argument("--clicks", default="clicks", help="topic of the click events")
    parser.add_argument("--counts", default="page-counts", help="topic of the counts")
    parser.add_argument("--events", type=int, default=2000, help="how many clicks")
    parser.add_argument("--seconds", type=int, default=60, help="event time they span")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--checkpoint", default=None,
                        help="the job's checkpoint directory (default: a new temporary one)")
    args = parser.parse_args(argv)
    with folio.Client(args.endpoint) as client:
        for topic, segments in ((args.clicks, 3), (args.counts, 2)):
            with contextlib.suppress(folio.TopicExistsError):
                client.create_topic(topic, segments=segments)
        events = clicks(args.events, args.seconds, args.seed)
        produce(client, args.clicks, events)
        endpoint = client.endpoint
    spark = spark_session()
    try:
        checkpoint = args.checkpoint or tempfile.mkdtemp(prefix="clickcount-")
        run_job(spark, endpoint, args.clicks, args.counts, checkpoint)
    finally:
        spark.stop()
    windows = len(expected_counts(events))
    print(f"counted {len(events)} clicks into {windows} (page, 10 s window) counts "
          f"in topic {args.counts!r}:", flush=True)
    return subprocess.call([sys.executable, "-m", "folio.cli", "consume", args.counts,
                            "--from-beginning", "--max-events", str(windows),
                            "--timeout-ms", "5000", "--endpoint", endpoint])


if __name__ == "__main__":
    sys.exit(main())
