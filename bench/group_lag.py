"""Cost of ``folio_group_lag`` for Kafka groups: one maintenance round and one scrape.

Run ``python -m bench.group_lag [--groups 1000] [--topics 2] [--partitions 16]``.
``GroupReport.update_lag`` runs over in-memory fakes of the group coordinator
(every group Stable, each with a committed offset on every partition of its
topics) and of the topics' segment lists (nothing is read from bookies, as
on a broker: end offsets come from segment records). It prints the CPU time
of a round, the longest stretch a round held the event loop (a ticker task
measures the gaps between its turns), and the time and size of rendering
the ``/metrics`` page with the series (on the scraping thread in a broker).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from types import SimpleNamespace
from typing import Any

from prometheus_client import generate_latest

from broker.kafka.consumer_groups.offsets import CommittedOffset
from broker.kafka.consumer_groups.report import GroupReport
from broker.kafka.consumer_groups.states import ConsumerGroupState


class _Topics:
    def __init__(self, partitions: int) -> None:
        self._partitions = partitions

    async def list_segments(self, topic: str, include_sealed: bool = True) -> list[Any]:
        del topic, include_sealed
        return [SimpleNamespace(number=p, end_offset=100) for p in range(self._partitions)]


def _report(groups: int, topics: int, partitions: int) -> GroupReport:
    offsets = {f"g{g}": {(f"t{g % 50}-{t}", p): CommittedOffset(5)
                         for t in range(topics) for p in range(partitions)}
               for g in range(groups)}
    known = {name: SimpleNamespace(state=ConsumerGroupState.STABLE) for name in offsets}
    coordinator: Any = SimpleNamespace(
        groups=lambda: known, store=SimpleNamespace(offsets=lambda name: dict(offsets[name])))
    topics_fake: Any = _Topics(partitions)
    return GroupReport(coordinator, topics_fake)


async def _longest_hold(report: GroupReport) -> float:
    gaps: list[float] = []
    done = asyncio.Event()

    async def ticker() -> None:
        last = time.perf_counter()
        while not done.is_set():
            await asyncio.sleep(0)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    await report.update_lag()
    done.set()
    await task
    return max(gaps)


async def _measure(args: argparse.Namespace) -> None:
    report = _report(args.groups, args.topics, args.partitions)
    await report.update_lag()  # warm-up
    start = time.process_time()
    for _ in range(args.rounds):
        await report.update_lag()
    per_round = (time.process_time() - start) / args.rounds
    hold = await _longest_hold(report)
    start = time.perf_counter()
    page = generate_latest()
    render = time.perf_counter() - start
    series = args.groups * args.topics * args.partitions
    print(f"{series} series: {per_round * 1000:.0f} ms CPU per round, longest event-loop "
          f"hold {hold * 1000:.1f} ms; /metrics page {render * 1000:.0f} ms, "
          f"{len(page) // 1024} KiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--topics", type=int, default=2, help="topics per group")
    parser.add_argument("--partitions", type=int, default=16, help="partitions per topic")
    parser.add_argument("--rounds", type=int, default=5)
    asyncio.run(_measure(parser.parse_args()))


if __name__ == "__main__":
    main()
