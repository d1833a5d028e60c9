"""Server-side assignors of the consumer protocol (KIP-848): ``uniform`` and ``range``.

An assignor maps each member to its partitions from the members'
subscriptions, the subscribed topics' partition counts and the previous
target assignment. Pure functions, no I/O: the group coordinator
(``broker.kafka.consumer_groups.modern``) calls one when the group epoch
goes up and persists nothing of it (members recompute after a restart).

- ``uniform`` (Kafka's default): every partition of a subscribed topic goes to
  one member subscribed to it, the members' counts differ by at most one
  where their subscriptions allow, and a partition stays with the member
  that had it in the previous target whenever the balance allows (sticky),
  so a member joining or leaving moves as few partitions as it can.
- ``range``: per topic, the members subscribed to it in member id order, each
  a contiguous range of partitions (the first ``count % members`` one more),
  as Kafka's range assignor; nothing sticky.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping

__all__ = ["ASSIGNORS", "DEFAULT_ASSIGNOR", "Assignment", "range_assign", "uniform_assign"]

#: member id -> topic -> partitions.
Assignment = dict[str, dict[str, set[int]]]
#: (subscriptions: member id -> topics, partition counts: topic -> count,
#: previous target) -> new target.
Assignor = Callable[[Mapping[str, frozenset[str]], Mapping[str, int], Assignment], Assignment]


def uniform_assign(subscriptions: Mapping[str, frozenset[str]], counts: Mapping[str, int],
                   previous: Assignment) -> Assignment:
    """Balanced and sticky (module docstring); O(P log M) for P partitions and M members.

    Each member first keeps what it had (of topics it still subscribes to) up
    to the even share (``total // members``, one more for as many members as
    the remainder allows); every other partition goes to the least loaded
    member subscribed to its topic; a last pass per topic moves partitions
    from a member holding two more than another that may take them.
    """
    members = sorted(subscriptions)
    target: Assignment = {member: {} for member in members}
    if not members:
        return target
    topics = sorted({t for subscribed in subscriptions.values() for t in subscribed})
    eligible = {t: [m for m in members if t in subscriptions[m]] for t in topics}
    owner = {(t, p): m for m, held in previous.items() for t, numbers in held.items()
             for p in numbers}
    partitions = [(t, p) for t in topics for p in range(counts.get(t, 0))]
    share, extra = divmod(len(partitions), len(members))
    had: dict[str, list[tuple[str, int]]] = {m: [] for m in members}
    free: list[tuple[str, int]] = []
    for tp in partitions:
        keeper = owner.get(tp)
        if keeper in had and tp[0] in subscriptions[keeper]:
            had[keeper].append(tp)
        else:
            free.append(tp)
    loads = dict.fromkeys(members, 0)
    holder: dict[tuple[str, int], str] = {}
    for member in members:
        keep = share + (1 if extra and len(had[member]) > share else 0)
        if keep > share:
            extra -= 1
        for tp in had[member][:keep]:
            holder[tp] = member
        loads[member] = min(keep, len(had[member]))
        free.extend(had[member][keep:])
    free.sort()
    for topic in topics:
        heap = [(loads[m], m) for m in eligible[topic]]
        heapq.heapify(heap)
        for tp in (tp for tp in free if tp[0] == topic):
            load, member = heapq.heappop(heap)
            holder[tp] = member
            loads[member] = load + 1
            heapq.heappush(heap, (load + 1, member))
    _even_out(topics, eligible, holder, loads)
    for (topic, partition), member in holder.items():
        target[member].setdefault(topic, set()).add(partition)
    return target


def _even_out(topics: list[str], eligible: dict[str, list[str]],
              holder: dict[tuple[str, int], str], loads: dict[str, int]) -> None:
    """One pass per topic: a partition moves to the least loaded member that may take it
    when its holder has two more (different subscriptions can leave such gaps)."""
    for topic in topics:
        heap = [(loads[m], m) for m in eligible[topic]]
        heapq.heapify(heap)
        for tp in sorted(tp for tp in holder if tp[0] == topic):
            load, lightest = heap[0]
            current = holder[tp]
            if loads[current] - load > 1:
                holder[tp] = lightest
                loads[current] -= 1
                loads[lightest] = load + 1
                heapq.heapreplace(heap, (load + 1, lightest))
                heap = [(loads[m], m) for m in eligible[topic]]  # the holder's load fell
                heapq.heapify(heap)


def range_assign(subscriptions: Mapping[str, frozenset[str]], counts: Mapping[str, int],
                 previous: Assignment) -> Assignment:
    """Contiguous ranges per topic (module docstring); ``previous`` is not used."""
    del previous
    target: Assignment = {member: {} for member in subscriptions}
    for topic in sorted({t for topics in subscriptions.values() for t in topics}):
        eligible = sorted(m for m, topics in subscriptions.items() if topic in topics)
        count = counts.get(topic, 0)
        share, extra = divmod(count, len(eligible))
        start = 0
        for index, member in enumerate(eligible):
            size = share + (1 if index < extra else 0)
            if size:
                target[member][topic] = set(range(start, start + size))
            start += size
    return target


#: The assignors by the name a client's ``group.remote.assignor`` gives.
ASSIGNORS: dict[str, Assignor] = {"uniform": uniform_assign, "range": range_assign}
DEFAULT_ASSIGNOR = "uniform"
