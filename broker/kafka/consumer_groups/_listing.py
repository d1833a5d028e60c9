"""DescribeGroups and ListGroups of classic groups: ``GroupSummaries`` over the group table."""

from __future__ import annotations

from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from broker.kafka.consumer_groups._table import GroupTable
from broker.kafka.consumer_groups.states import ConsumerGroupState

__all__ = ["GroupSummaries", "GroupSummary"]

_S = ConsumerGroupState


@dataclass(frozen=True, slots=True)
class GroupSummary:
    """A group as DescribeGroups and ListGroups show it.

    ``members``: (member id, group instance id, client id, client host,
    metadata of the chosen protocol, assignment).
    """

    group_id: str
    state: ConsumerGroupState
    protocol_type: str
    protocol_name: str
    members: tuple[tuple[str, str | None, str, str, bytes, bytes], ...] = ()


class GroupSummaries:
    """The groups of a ``GroupTable`` as DescribeGroups and ListGroups answer them (read-only)."""

    def __init__(self, table: GroupTable) -> None:
        self._table = table

    def describe(self, group_id: str) -> tuple[ErrorCode, GroupSummary]:
        """A DescribeGroups entry; an unknown group is Dead (no error), as in Kafka."""
        error = self._table.group_id_error(group_id)
        group = self._table.get(group_id) if error is ErrorCode.none else None
        if group is None:
            return error, GroupSummary(group_id, _S.DEAD, "", "")
        stable = group.state is _S.STABLE
        members = tuple(
            (m.member_id, m.group_instance_id, m.client_id, m.client_host,
             m.metadata_of(group.protocol_name) if stable else b"",
             m.assignment if stable else b"")
            for m in group.members.values())
        return ErrorCode.none, GroupSummary(group_id, group.state, group.protocol_type or "",
                                            group.protocol_name or "", members)

    def list_groups(self, states: set[ConsumerGroupState] | None, types: set[str] | None,
                    ) -> list[GroupSummary]:
        """Every group, filtered by state and protocol type (None: any)."""
        groups = self._table.by_id()
        found = []
        for group_id in sorted(groups):
            group = groups[group_id]
            if group.state is _S.DEAD:
                continue
            if states is not None and group.state not in states:
                continue
            if types is not None and (group.protocol_type or "") not in types:
                continue
            found.append(GroupSummary(group_id, group.state, group.protocol_type or "",
                                      group.protocol_name or ""))
        return found
