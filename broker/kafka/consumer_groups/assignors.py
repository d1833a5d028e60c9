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

from collections.abc import Callable, Mapping

__all__ = ["ASSIGNORS", "DEFAULT_ASSIGNOR", "Assignment", "range_assign", "uniform_assign"]

#: member id -> topic -> partitions.
Assignment = dict[str, dict[str, set[int]]]
#: (subscriptions: member id -> topics, partition counts: topic -> count,
#: previous target) -> new target.
Assignor = Callable[[Mapping[str, frozenset[str]], Mapping[str, int], Assignment], Assignment]


def uniform_assign(subscriptions: Mapping[str, frozenset[str]], counts: Mapping[str, int],
                   previous: Assignment) -> Assignment:
    """Balanced and sticky (module docstring)."""
    members = sorted(subscriptions)
    target: Assignment = {member: {} for member in members}
    if not members:
        return target
    # Partitions of topics someone subscribes to, with the members that may take each.
    takers: dict[tuple[str, int], list[str]] = {}
    for topic in sorted({t for topics in subscriptions.values() for t in topics}):
        eligible = [m for m in members if topic in subscriptions[m]]
        for partition in range(counts.get(topic, 0)):
            takers[(topic, partition)] = eligible
    total = len(takers)
    # The most a member keeps from before: an even share (``_even_out`` fixes the rest).
    quota = dict.fromkeys(members, -(-total // len(members)))
    loads = dict.fromkeys(members, 0)
    free: list[tuple[str, int]] = []
    for tp in sorted(takers):
        keeper = next((m for m, topics in previous.items()
                       if tp[1] in topics.get(tp[0], ())), None)
        if keeper in loads and keeper in takers[tp] and loads[keeper] < quota[keeper]:
            target[keeper].setdefault(tp[0], set()).add(tp[1])
            loads[keeper] += 1
        else:
            free.append(tp)
    for tp in free:
        chosen = min(takers[tp], key=lambda m: (loads[m], m))
        target[chosen].setdefault(tp[0], set()).add(tp[1])
        loads[chosen] += 1
    _even_out(target, takers, loads)
    return target


def _even_out(target: Assignment, takers: dict[tuple[str, int], list[str]],
              loads: dict[str, int]) -> None:
    """Move partitions from the most to the least loaded member that may take them."""
    moved = True
    while moved:
        moved = False
        for tp, who in sorted(takers.items()):
            holder = next(m for m in who if tp[1] in target[m].get(tp[0], ()))
            lightest = min(who, key=lambda m: (loads[m], m))
            if loads[holder] - loads[lightest] > 1:
                target[holder][tp[0]].discard(tp[1])
                if not target[holder][tp[0]]:
                    del target[holder][tp[0]]
                target[lightest].setdefault(tp[0], set()).add(tp[1])
                loads[holder] -= 1
                loads[lightest] += 1
                moved = True


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
