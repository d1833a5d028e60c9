"""``python -m bench.kafka_share``: a librdkafka share consumer against a plain consumer.

One ``folio standalone`` (sync durability) on a fresh directory. For each
round: librdkafka's producer writes ``duration_s`` of ``size``-byte events
into a fresh 1-partition topic, then a plain consumer (``bench.kafka.
kafka_consume``) and a share consumer (``ShareConsumer``, implicit
acknowledgement, ``max.poll.records`` 2000, its group started at the
earliest offset) each read them all. Printed: events/s and the broker's CPU
per event of each read, the best of the rounds. A share group's records are
acquired per block and acknowledged per range (docs/kafka.md, "Share
groups"): its broker cost per event should stay within a small factor of a
plain fetch's, whatever the batch size.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.kafka import _broker_cpu_s, _start, kafka_consume, kafka_produce

__all__ = ["share_consume"]


def share_consume(bootstrap: str, topic: str, count: int) -> float:
    """Events/s reading ``count`` events of ``topic`` with librdkafka's share consumer."""
    from confluent_kafka import ShareConsumer  # noqa: PLC0415
    from confluent_kafka.admin import (  # noqa: PLC0415
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    group = f"{topic}-share"
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest",
                    incremental_operation=AlterConfigOpType.SET)])
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept while its call runs
    admin.incremental_alter_configs([resource])[resource].result(60)
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                              "max.poll.records": 2000})
    consumer.subscribe([topic])
    read = 0
    started = time.perf_counter()
    try:
        while read < count:
            read += sum(1 for message in consumer.poll(1.0) if message.error() is None)
        consumer.commit_sync(60)
        elapsed = time.perf_counter() - started
    finally:
        consumer.close()
    return count / elapsed


def run(size: int, duration_s: float, rounds: int) -> dict[str, Any]:
    """The best rate and lowest broker CPU per event of each reader over ``rounds``."""
    best: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="folio-kafka-share-bench-") as directory:
        process, _endpoint, bootstrap = _start(Path(directory) / "data")
        try:
            for index in range(rounds):
                topic = f"share-bench-{index}"
                _rate, count = kafka_produce(bootstrap, topic, size, duration_s)
                for name, read in (("consumer", kafka_consume), ("share", share_consume)):
                    before = _broker_cpu_s(process.pid)
                    rate = read(bootstrap, topic, count)
                    cpu_us = (_broker_cpu_s(process.pid) - before) / count * 1e6
                    best[f"{name}_events_per_s"] = max(best.get(f"{name}_events_per_s", 0),
                                                       rate)
                    key = f"{name}_broker_us_per_event"
                    best[key] = min(best.get(key, float("inf")), cpu_us)
                best["events"] = count
        finally:
            process.terminate()
            process.wait()
    return {"size": size, **{k: round(v, 1) for k, v in best.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.kafka_share", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=100, help="event bytes (default 100)")
    parser.add_argument("--duration", type=float, default=3.0,
                        help="seconds of producing per round (default 3)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds (default 2)")
    args = parser.parse_args()
    print(json.dumps(run(args.size, args.duration, args.rounds)))


if __name__ == "__main__":
    main()
