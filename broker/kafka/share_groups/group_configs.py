"""Where share groups' configs live: the share state topic (one broker) or ZooKeeper (a cluster).

A group's configs (``config.GROUP_CONFIGS``, set by IncrementalAlterConfigs
on a GROUP resource) are read by the group's coordinator (session timeout,
heartbeat interval) and by every broker leading one of the group's
partitions (lock duration, delivery-count limit, ``share.auto.offset.reset``,
isolation). Both kinds of ``GroupConfigs``:

- ``StoredGroupConfigs`` (a standalone): in the share state topic
  (``store``), loaded per group at its first use, written before they take
  effect.
- ``WatchedGroupConfigs`` (a cluster): one node of the metadata store,
  ``/folio/kafka/share_group_configs``, kept as the dynamic broker configs
  are (``broker.watched_table``): every broker holds the table in memory,
  watches it, and a change is one compare-and-set, so a config set through
  any broker is in force on every broker once its watch fires (this one at
  once). Share partitions read their group's settings at each fetch and
  acknowledgement, so a change reaches partitions already loaded too.

Outcomes of a change in the cluster: applied (yes); refused by the store
(no: passed up, nothing changed); unknown (``LedgerError``,
``MetadataUnavailableError`` among them: the compare-and-set may have been
applied). After an unknown one the node is read back: holding the configs
asked, the change is done (answered as such); holding others, or the read
failing too, the error is passed up and IncrementalAlterConfigs answers it
(a retry sets the same values again, which is idempotent). Crash windows:
the broker dies after the compare-and-set applied but before it answers:
the change is in force everywhere and the client, seeing no answer,
retries it (same result).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol, Self

from broker.kafka.share_groups.store import ShareStore
from broker.metadata_paths import SHARE_GROUP_CONFIGS_PATH
from broker.watched_table import WatchedTable
from ledger.api import MetadataStore
from ledger.errors import LedgerError

__all__ = ["GroupConfigTable", "GroupConfigs", "StoredGroupConfigs", "WatchedGroupConfigs"]

_FORMAT = 1


class GroupConfigs(Protocol):
    """Each share group's configs as set (names of ``config.GROUP_CONFIGS``)."""

    def of(self, group_id: str) -> Mapping[str, str]:
        """The configs set on the group now (empty: none), from memory."""

    async def load(self, group_id: str) -> None:
        """Make ``of`` current for the group (raises what the store raises)."""

    async def write(self, group_id: str, configs: Mapping[str, str]) -> None:
        """Replace the group's configs (empty: delete them); in force once this returns.

        Raises what the store raises; the outcome is then unknown (the next
        load or write decides)."""


class StoredGroupConfigs:
    """A standalone's group configs, in the share state topic (module docstring)."""

    def __init__(self, store: ShareStore) -> None:
        self._store = store
        self._configs: dict[str, dict[str, str]] = {}

    def of(self, group_id: str) -> Mapping[str, str]:
        return self._configs.get(group_id, {})

    async def load(self, group_id: str) -> None:
        if group_id not in self._configs:
            self._configs[group_id] = await self._store.load_configs(group_id)

    async def write(self, group_id: str, configs: Mapping[str, str]) -> None:
        if configs:
            await self._store.write_configs(group_id, dict(configs))
            self._configs[group_id] = dict(configs)
        else:
            await self._store.delete_configs(group_id)
            self._configs.pop(group_id, None)


@dataclass(frozen=True, slots=True)
class GroupConfigTable:
    """Every share group's configs: group -> name -> value (versioned JSON)."""

    groups: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    version: int = -1

    def encode(self) -> bytes:
        return json.dumps({"v": _FORMAT, "groups": {g: dict(c) for g, c in self.groups.items()}},
                          sort_keys=True).encode()

    @classmethod
    def decode(cls, data: bytes, version: int) -> Self:
        if not data:
            return cls(version=version)
        raw = json.loads(data)
        if raw.get("v") != _FORMAT:
            raise ValueError(f"share group configs have an unknown format: {data[:40]!r}")
        return cls({str(g): {str(k): str(v) for k, v in c.items()}
                    for g, c in raw.get("groups", {}).items()}, version)

    def with_group(self, group_id: str, configs: Mapping[str, str]) -> GroupConfigTable:
        """A copy with the group's configs replaced (empty: removed)."""
        groups = {g: c for g, c in self.groups.items() if g != group_id}
        if configs:
            groups[group_id] = dict(configs)
        return GroupConfigTable(groups, self.version)


class WatchedGroupConfigs:
    """A cluster's group configs, in one watched metadata-store node (module docstring)."""

    def __init__(self, store: MetadataStore) -> None:
        self._node = WatchedTable(store, SHARE_GROUP_CONFIGS_PATH, GroupConfigTable(),
                                  "kafka: the share group configs")

    async def start(self) -> None:
        """Create the node if missing, read it and watch it (``LedgerError`` if unreachable)."""
        await self._node.start()

    async def close(self) -> None:
        """Stop watching."""
        await self._node.close()

    def of(self, group_id: str) -> Mapping[str, str]:
        return self._node.table.groups.get(group_id, {})

    async def load(self, group_id: str) -> None:
        """Nothing to do: the table is in memory, kept current by its watch."""

    async def write(self, group_id: str, configs: Mapping[str, str]) -> None:
        wanted = dict(configs)
        try:
            await self._node.change(lambda table: table.with_group(group_id, wanted))
        except LedgerError:
            # Unknown outcome: maybe applied. Read back; if the node holds what was
            # asked the change is done, else the caller gets the error (a retry is
            # idempotent). A failing read leaves it unknown: the same error.
            try:
                landed = (await self._node.refresh()).groups.get(group_id, {})
            except LedgerError:
                landed = None
            if landed != wanted:
                raise
