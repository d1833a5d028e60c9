"""The share groups' durable state: share partitions and group configs in a compacted topic.

Kept in the system topic ``__folio_kafka_share_state`` (a ``CompactedTopic``,
as the committed offsets are kept in ``_kafka_offsets``), one key per share
partition and one per group's configs; the value is versioned JSON:

- share partition ``["state", group, topic, partition]``:
  ``{"v": 1, "start": SPSO, "runs": [[first, last, state, delivery_count], ...]}``
  where an ACQUIRED run is written as AVAILABLE (a lock does not outlive the
  broker: after a restart the records go to a member again);
- group configs ``["config", group]``: ``{"v": 1, "configs": {name: value}}``.

A write returns once durable; it raises what the topic raises, with an
outcome unknown: it may have landed. The callers say what that means.
"""

from __future__ import annotations

import json
from typing import Any

from broker.errors import CorruptDataError, TopicNotFoundError
from broker.kafka.share_groups.records import RecordState, Run, ShareRecords
from broker.system.compacted_topic import CompactedTopic
from broker.topics.manager import TopicManager

__all__ = ["SHARE_STATE_TOPIC", "ShareStore"]

SHARE_STATE_TOPIC = "__folio_kafka_share_state"
_FORMAT = 1


def _state_key(group_id: str, topic: str, partition: int) -> str:
    return json.dumps(["state", group_id, topic, partition])


def _config_key(group_id: str) -> str:
    return json.dumps(["config", group_id])


class ShareStore:
    """Share partitions' states and groups' configs, durable (module docstring)."""

    def __init__(self, topics: TopicManager) -> None:
        self._topics = topics
        self._log = CompactedTopic(topics, SHARE_STATE_TOPIC)

    async def load_records(self, group_id: str, topic: str,
                           partition: int) -> ShareRecords | None:
        """The share partition as last written, None if never written."""
        raw = await self._log.get(_state_key(group_id, topic, partition))
        return None if raw is None else _records(raw)

    async def every_records(self) -> dict[tuple[str, str, int], ShareRecords]:
        """Every share partition written, by (group, topic, partition): one read of the
        live share states (the lag metric's maintenance round); none, and the topic
        not made, before any share group wrote state."""
        try:
            await self._topics.get_topic(SHARE_STATE_TOPIC)
        except TopicNotFoundError:
            return {}
        found = await self._log.read_prefix('["state",')
        every = {}
        for key, raw in found.items():
            _, group_id, topic, partition = json.loads(key)
            every[group_id, topic, int(partition)] = _records(raw)
        return every

    async def write_records(self, group_id: str, topic: str, partition: int,
                            records: ShareRecords) -> None:
        """Write the share partition's state (ACQUIRED runs as AVAILABLE)."""
        runs = [[run.first, run.last,
                 (RecordState.AVAILABLE if run.state is RecordState.ACQUIRED
                  else run.state).value, run.delivery_count] for run in records.runs]
        value = {"v": _FORMAT, "start": records.start, "runs": runs}
        await self._log.write(_state_key(group_id, topic, partition),
                              json.dumps(value, separators=(",", ":")).encode())

    async def delete_records(self, group_id: str, topic: str, partition: int) -> None:
        """Forget a share partition (a tombstone)."""
        await self._log.write(_state_key(group_id, topic, partition), None)

    async def share_partitions(self, group_id: str) -> list[tuple[str, int]]:
        """The (topic, partition) of every share partition of the group written."""
        prefix = json.dumps(["state", group_id])[:-1] + ","
        found = await self._log.read_prefix(prefix)
        return sorted((json.loads(key)[2], json.loads(key)[3]) for key in found)

    async def topic_partitions(self, topic: str) -> list[tuple[str, int]]:
        """The (group, partition) of every share partition of ``topic`` written."""
        found = await self._log.read_prefix('["state",')
        keys = [json.loads(key) for key in found]
        return sorted((key[1], key[3]) for key in keys if key[2] == topic)

    async def load_configs(self, group_id: str) -> dict[str, str]:
        """The group's configs as set (empty: none)."""
        raw = await self._log.get(_config_key(group_id))
        return {} if raw is None else dict(_decoded(raw)["configs"])

    async def delete_configs(self, group_id: str) -> None:
        """Forget the group's configs (a tombstone)."""
        await self._log.write(_config_key(group_id), None)

    async def write_configs(self, group_id: str, configs: dict[str, str]) -> None:
        """Replace the group's configs."""
        value = {"v": _FORMAT, "configs": configs}
        await self._log.write(_config_key(group_id), json.dumps(value).encode())


def _records(raw: bytes) -> ShareRecords:
    value = _decoded(raw)
    runs = []
    for first, last, code, count in value["runs"]:
        state = RecordState(code)
        if state is RecordState.ACQUIRED:
            state = RecordState.AVAILABLE
        runs.append(Run(int(first), int(last), state, int(count)))
    return ShareRecords(int(value["start"]), runs)


def _decoded(raw: bytes) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except ValueError:
        raise CorruptDataError("share state record is not JSON") from None
    if not isinstance(value, dict) or value.get("v") != _FORMAT:
        raise CorruptDataError(f"share state record has an unknown format: {raw[:40]!r}")
    return value
