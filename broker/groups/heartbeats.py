"""Reader group heartbeats shared through the metadata store (a cluster of brokers).

On one broker, heartbeats live in its memory (``broker.groups.liveness``). In
a cluster a member may heartbeat to any broker, while exactly one broker
sweeps each group (the owner of the group's container): so each heartbeat is
also written to ``/folio/group-heartbeats/<group>/<reader>`` (quoted names),
holding the session id and the reported offsets. The sweeper reads the node
of each member when it checks the group (about once per session timeout) and
counts a member as heard when the node's version moved since its last look,
on its own clock: no clocks are compared across brokers.

Cost: one metadata write per heartbeat, one read per member per check.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Final
from urllib.parse import quote, unquote

from broker.metadata_paths import HEARTBEATS_ROOT
from ledger.api import MetadataStore
from ledger.errors import NodeExistsError, NoNodeError
from ledger.records import dump_record, load_record

__all__ = ["HEARTBEATS_ROOT", "HeartbeatBoard", "SharedHeartbeat"]

#: The heartbeat record format (ledger.records; earlier builds wrote none: read as 1).
_FORMAT: Final = 1


@dataclass(frozen=True, slots=True)
class SharedHeartbeat:
    """A member's last heartbeat as stored: the node version, session and offsets."""

    version: int
    session_id: str
    offsets: dict[str, int]


def _path(group: str, reader_id: str | None = None) -> str:
    path = f"{HEARTBEATS_ROOT}/{quote(group, safe='')}"
    return path if reader_id is None else f"{path}/{quote(reader_id, safe='')}"


class HeartbeatBoard:
    """Heartbeats of every group's members in the metadata store."""

    def __init__(self, store: MetadataStore) -> None:
        self._store = store

    async def write(self, group: str, reader_id: str, session_id: str,
                    offsets: dict[str, int]) -> None:
        data = dump_record(_FORMAT, {"session_id": session_id, "offsets": offsets})
        path = _path(group, reader_id)
        try:
            await self._store.set(path, data, -1)
        except NoNodeError:
            with contextlib.suppress(NodeExistsError):
                await self._store.create(path, data, make_parents=True)

    async def read(self, group: str, reader_id: str) -> SharedHeartbeat | None:
        try:
            node = await self._store.get(_path(group, reader_id))
        except NoNodeError:
            return None
        try:
            # Earlier builds wrote no version: their heartbeats are format 1.
            fields = load_record(node.data, "heartbeat", (_FORMAT,), unversioned=_FORMAT)
            return SharedHeartbeat(node.version, str(fields["session_id"]),
                                   {str(k): int(v) for k, v in fields["offsets"].items()})
        except (ValueError, KeyError, TypeError, AttributeError):
            return None

    async def forget_others(self, group: str, members: set[str]) -> None:
        """Delete the nodes of readers that are no longer members of ``group``."""
        try:
            names = await self._store.children(_path(group))
        except NoNodeError:
            return
        for name in names:
            if unquote(name) not in members:
                with contextlib.suppress(NoNodeError):
                    await self._store.delete(f"{_path(group)}/{name}")
