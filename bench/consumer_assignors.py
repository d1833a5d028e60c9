"""Cost of the KIP-848 server-side assignors: one target assignment, in the event loop.

Run ``python -m bench.consumer_assignors [--members 10,100,200] [--partitions-per-member 10]``.
For each group size it times ``uniform`` from nothing, ``uniform`` again
when one more member joins (sticky: from the previous target) and ``range``;
each runs on the broker's event loop whenever a group's epoch goes up
(``broker.kafka.consumer_groups.modern``), so it is the longest stretch an
epoch bump holds the loop.
"""

from __future__ import annotations

import argparse
import time

from broker.kafka.consumer_groups.assignors import range_assign, uniform_assign


def _ms(start: float) -> float:
    return (time.perf_counter() - start) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", default="10,100,200",
                        help="group sizes, comma-separated (default 10,100,200)")
    parser.add_argument("--partitions-per-member", type=int, default=10)
    args = parser.parse_args()
    for members in (int(n) for n in args.members.split(",")):
        partitions = members * args.partitions_per_member
        subscriptions = {f"m{i:05d}": frozenset({"t"}) for i in range(members)}
        counts = {"t": partitions}
        start = time.perf_counter()
        first = uniform_assign(subscriptions, counts, {})
        fresh = _ms(start)
        subscriptions["joining"] = frozenset({"t"})
        start = time.perf_counter()
        uniform_assign(subscriptions, counts, first)
        joined = _ms(start)
        start = time.perf_counter()
        range_assign(subscriptions, counts, first)
        ranged = _ms(start)
        print(f"{members} members, {partitions} partitions: uniform {fresh:.1f} ms, "
              f"uniform with one joining {joined:.1f} ms, range {ranged:.1f} ms")


if __name__ == "__main__":
    main()
