"""The group table: every classic group this broker coordinates, by id.

Kafka's ``GroupMetadataManager`` keeps its ``groupMetadataCache`` the same
way. ``GroupTable`` owns the dict of ``Group``s and the rule for a group id
(not empty, at most ``max_group_id_bytes`` of UTF-8, so its record key
fits); the other parts of the coordinator (membership, offset commits, the
group records, the listings) are each given the table and change the groups
through it. The groups themselves (``members.Group``) are plain data: the
membership part changes their members, states and timers.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.kafka.consumer_groups.members import Group

__all__ = ["GroupTable"]


class GroupTable:
    """Groups by id (one asyncio loop: every change between two awaits is atomic)."""

    def __init__(self, max_group_id_bytes: int) -> None:
        self._max_group_id_bytes = max_group_id_bytes
        self._groups: dict[str, Group] = {}

    def group_id_error(self, group_id: str | None) -> ErrorCode:
        """INVALID_GROUP_ID for an empty or too long id, else NONE."""
        if not group_id or len(group_id.encode()) > self._max_group_id_bytes:
            return ErrorCode.invalid_group_id
        return ErrorCode.none

    def get(self, group_id: str) -> Group | None:
        """The group, None if it is not known."""
        return self._groups.get(group_id)

    def get_or_add(self, group_id: str) -> Group:
        """The group, added (Empty, generation 0) if it is not known."""
        group = self._groups.get(group_id)
        if group is None:
            group = self._groups[group_id] = Group(group_id)
        return group

    def put(self, group: Group) -> None:
        """Know ``group`` under its id (replacing any group of that id)."""
        self._groups[group.group_id] = group

    def pop(self, group_id: str) -> Group | None:
        """Forget the group; it, None if it was not known."""
        return self._groups.pop(group_id, None)

    def remove(self, group: Group) -> None:
        """Forget ``group`` if the table still holds this very group under its id."""
        if self._groups.get(group.group_id) is group:
            del self._groups[group.group_id]

    def by_id(self) -> dict[str, Group]:
        """Every group, by id: the table's own dict (callers may add a group to it)."""
        return self._groups

    def fenced(self, group_id: str, member_id: str, group_instance_id: str | None) -> bool:
        """Whether a request of ``member_id`` as static ``group_instance_id`` is from a
        replaced member (FENCED_INSTANCE_ID): the instance is now another member id."""
        group = self._groups.get(group_id)
        if group is None or group_instance_id is None:
            return False
        current = group.member_by_instance(group_instance_id)
        return current is not None and current.member_id != member_id
