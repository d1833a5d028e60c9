"""The target assignment of containers to brokers: a pure function every broker computes.

Every broker computes the same plan from the same view (the sorted ids of the
brokers taking part, and who owns each container now) and moves only itself
towards it: it releases the containers it holds beyond its share and claims
unowned ones within its share. Races between brokers whose views differ for
a moment are settled by the ephemeral create: whoever creates the ownership
node first owns the container; the others see it and plan again.

Shares: with ``n`` brokers sorted by id, the broker at index ``i`` gets
``count // n`` containers, one more when ``i < count % n``. A broker keeps the
lowest-numbered containers it holds (so a join moves only what must move:
the joining broker's share, taken from those above their share) and releases
the highest. Unowned containers are dealt to the brokers below their share,
in id order, lowest container first. The deficits always cover the unowned
containers (the shares add up to ``count``), so nothing stays unowned while a
broker takes part.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["Plan", "plan", "share"]


@dataclass(frozen=True, slots=True)
class Plan:
    """What one broker should do now: containers to claim and to release, ascending."""

    claim: tuple[int, ...] = ()
    release: tuple[int, ...] = ()


def share(broker_id: str, members: Sequence[str], count: int) -> int:
    """How many of ``count`` containers ``broker_id`` should own among ``members``."""
    ordered = sorted(set(members))
    if broker_id not in ordered:
        return 0
    index = ordered.index(broker_id)
    return count // len(ordered) + (1 if index < count % len(ordered) else 0)


def plan(me: str, members: Sequence[str], owners: Mapping[int, str], count: int) -> Plan:
    """The moves of broker ``me`` towards the target (see the module docstring).

    Args:
        me: this broker's id.
        members: ids of the brokers taking part in the balance (``me`` is left
            out while it is leaving or not yet registered: then it claims
            nothing and releases everything it holds).
        owners: container -> owner id, for every owned container.
        count: the number of containers.
    """
    ordered = sorted(set(members))
    mine = sorted(c for c, owner in owners.items() if owner == me)
    quota = share(me, ordered, count)
    if len(mine) > quota:
        return Plan(release=tuple(mine[quota:]))
    unowned = [c for c in range(count) if c not in owners]
    if not unowned or me not in ordered:
        return Plan()
    held = dict.fromkeys(ordered, 0)
    for owner in owners.values():
        if owner in held:
            held[owner] += 1
    dealt: dict[str, list[int]] = {member: [] for member in ordered}
    position = 0
    for member in ordered:
        deficit = max(0, share(member, ordered, count) - held[member])
        dealt[member].extend(unowned[position:position + deficit])
        position += deficit
    return Plan(claim=tuple(dealt[me]))
