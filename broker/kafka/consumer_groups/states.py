"""The state machine of a Kafka consumer group (Kafka's classic protocol), as a table.

``Empty``: no member (offsets may be committed without a generation);
``PreparingRebalance``: members are (re)joining, until all known ones have or
the rebalance timeout passes; ``CompletingRebalance``: the generation is
decided, the leader's SyncGroup with the assignment is awaited; ``Stable``:
every member has its assignment; ``Dead``: the group is gone (it was deleted
or another broker coordinates it now).
"""

from __future__ import annotations

import enum

__all__ = ["ConsumerGroupState", "ConsumerGroupStateError", "by_name", "check_transition"]


class ConsumerGroupState(enum.Enum):
    """A group's state; the value is the name Kafka's DescribeGroups and ListGroups use."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


class ConsumerGroupStateError(Exception):
    """A move the state machine does not allow (a bug in the coordinator, never client input)."""

    def __init__(self, group_id: str, actual: ConsumerGroupState,
                 target: ConsumerGroupState) -> None:
        super().__init__(f"group {group_id!r}: no move from {actual.value} to {target.value}")
        self.group_id = group_id
        self.actual = actual
        self.target = target


_S = ConsumerGroupState
#: The states each state may move to (Kafka's GroupMetadata valid previous states, turned round).
_MOVES: dict[ConsumerGroupState, frozenset[ConsumerGroupState]] = {
    _S.EMPTY: frozenset({_S.PREPARING_REBALANCE, _S.DEAD}),
    _S.PREPARING_REBALANCE: frozenset({_S.COMPLETING_REBALANCE, _S.EMPTY, _S.DEAD}),
    _S.COMPLETING_REBALANCE: frozenset({_S.STABLE, _S.PREPARING_REBALANCE, _S.DEAD}),
    _S.STABLE: frozenset({_S.PREPARING_REBALANCE, _S.DEAD}),
    _S.DEAD: frozenset({_S.DEAD}),
}


def check_transition(group_id: str, actual: ConsumerGroupState,
                     target: ConsumerGroupState) -> ConsumerGroupState:
    """``target`` if ``actual`` may move to it; ``ConsumerGroupStateError`` otherwise."""
    if target not in _MOVES[actual]:
        raise ConsumerGroupStateError(group_id, actual, target)
    return target


def by_name(name: str) -> ConsumerGroupState | None:
    """The state a ListGroups states filter names (case-insensitive, as Kafka), None if none."""
    for state in ConsumerGroupState:
        if state.value.lower() == name.lower():
            return state
    return None
