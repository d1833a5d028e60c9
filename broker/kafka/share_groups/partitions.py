"""Share partitions: records handed out to a group's members, acknowledged, persisted.

A share partition (a group, a topic partition) lives on the broker that owns
the partition's segment, as Kafka's lives with the partition leader; its
records' states are ``records.ShareRecords``. It is loaded from the share
state topic (``store``) at its first use, or started by the group's
``share.auto.offset.reset`` (``latest``: the segment's end; ``earliest``:
its start) and that start written at once, so a restart does not move it.

**Fetching** (``fetch``, under the partition's lock): locks that expired are
released, then AVAILABLE runs are acquired again (read from the segment, whole
blocks) and new blocks from the end on, one run per block, until
``max_records``; at most ``max_in_flight`` records between start and end.
Entries the read path leaves out (aborted transactions' data for
``read_committed``, control entries) become ARCHIVED runs: never delivered.

**Acknowledging** (``acknowledge``): the ranges are checked (all acquired by
the member, else INVALID_RECORD_STATE and nothing of that batch changes),
applied, and the state is written before the answer.

Crash windows (the state is written at acknowledgements and at a share
partition's start, never at an acquisition):

- acquired, not acknowledged, broker dies: the record is AVAILABLE in the
  state written (or past its end), so it is delivered again after the
  restart; its delivery count is the one last written, plus one: an
  acquisition not followed by a written acknowledgement is not counted (as
  in Kafka, which also writes only on acknowledgement).
- acknowledged, state written, answer lost: the client sees an error (an
  unknown outcome); the record is never delivered again (ACCEPT) or is
  (RELEASE): both what it asked.
- acknowledged in memory, write failed or unknown: the answer is the error;
  memory has the new state, so later answers do not contradict it, and the
  next write of the partition carries it. If the broker dies before, an
  ACCEPTed record is delivered again: at-least-once, never lost.
- a member leaves or its lock expires: nothing is written; AVAILABLE is how
  an acquired record is written anyway.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from broker.api import Isolation, ReadBlock, SegmentHandle
from broker.errors import BrokerError
from broker.kafka.blocks import batch_of_block
from broker.kafka.error_codes import error_code
from broker.kafka.share_groups.config import ShareConfig
from broker.kafka.share_groups.records import (
    AckType,
    RecordStateError,
    ShareRecords,
)
from broker.kafka.share_groups.store import ShareStore
from ledger.errors import LedgerError

__all__ = ["AckBatch", "Acquired", "SharePartition", "SharePartitions"]

#: (first offset, last offset, acknowledge types) of one acknowledgement batch.
AckBatch = tuple[int, int, tuple[int, ...]]
_READ_BYTES = 1024 * 1024


@dataclass
class Acquired:
    """What one fetch of a share partition hands to a member."""

    batches: list[bytes] = field(default_factory=list)
    #: (first offset, last offset, delivery count) of each acquired range.
    ranges: list[tuple[int, int, int]] = field(default_factory=list)
    size: int = 0


@dataclass
class SharePartition:
    """One share partition: its records and the lock its changes take."""

    group_id: str
    topic: str
    partition: int
    records: ShareRecords
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    #: Done when records became AVAILABLE (released): waiting fetches look again.
    released: asyncio.Future[None] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future())

    def wake(self) -> None:
        if not self.released.done():
            self.released.set_result(None)
        self.released = asyncio.get_running_loop().create_future()


class SharePartitions:
    """The share partitions of this broker (module docstring).

    Args:
        store: the durable state.
        config_of: a group's settings.
    """

    def __init__(self, store: ShareStore, config_of: Callable[[str], ShareConfig]) -> None:
        self._store = store
        self._config_of = config_of
        self._parts: dict[tuple[str, str, int], SharePartition] = {}
        self._loading: dict[tuple[str, str, int], asyncio.Lock] = {}

    def of_group(self, group_id: str) -> list[SharePartition]:
        """The group's share partitions loaded here."""
        return [part for key, part in self._parts.items() if key[0] == group_id]

    def forget_group(self, group_id: str) -> None:
        """Drop the group's share partitions from memory (deleted)."""
        for key in [key for key in self._parts if key[0] == group_id]:
            del self._parts[key]

    def forget_where(self, moved: Callable[[str, int], bool]) -> None:
        """Drop from memory the share partitions of every (topic, partition) ``moved``
        (a cluster broker gave their container up). A fetch or acknowledgement under
        way on one finishes on the dropped object; its write is refused (the store
        writes only containers served here), so nothing of it is durable, as if this
        broker had died: the next owner reads what was last written."""
        for key in [key for key in self._parts if moved(key[1], key[2])]:
            part = self._parts.pop(key)
            part.wake()

    async def partition(self, group_id: str, topic: str, number: int,
                        segment: SegmentHandle) -> SharePartition:
        """The share partition, loaded or started (``share.auto.offset.reset``).

        Raises what the store and the segment raise.
        """
        key = (group_id, topic, number)
        part = self._parts.get(key)
        if part is not None:
            return part
        async with self._loading.setdefault(key, asyncio.Lock()):
            part = self._parts.get(key)
            if part is not None:
                return part
            records = await self._store.load_records(group_id, topic, number)
            if records is None:
                info = segment.info().segment
                earliest = self._config_of(group_id).auto_offset_reset == "earliest"
                records = ShareRecords(info.start_offset if earliest else info.end_offset)
                # Crash window: not written, the next start computes it again
                # (``latest``: a later end; no record of the gap was delivered).
                await self._store.write_records(group_id, topic, number, records)
            part = self._parts[key] = SharePartition(group_id, topic, number, records)
            return part

    async def records_of(self, group_id: str, topic: str, number: int) -> ShareRecords | None:
        """The share partition's records: loaded here, else as written, None if never
        started (raises what the store raises)."""
        part = self._parts.get((group_id, topic, number))
        if part is not None:
            return part.records
        return await self._store.load_records(group_id, topic, number)

    async def reset(self, group_id: str, topic: str, number: int, start: int | None) -> None:
        """AlterShareGroupOffsets (``start``) or DeleteShareGroupOffsets (None) of an empty
        group: the share partition starts at ``start`` with nothing in flight, or is
        forgotten (its next fetch starts it by ``share.auto.offset.reset``).

        Written first, then in memory. Raises what the store raises: the outcome is
        then unknown and memory unchanged; the same call again settles it.
        """
        key = (group_id, topic, number)
        async with self._loading.setdefault(key, asyncio.Lock()):
            part = self._parts.get(key)
            if part is None:
                await self._write_reset(group_id, topic, number, start)
                return
            async with part.lock:
                await self._write_reset(group_id, topic, number, start)
                if start is None:
                    del self._parts[key]
                else:
                    part.records = ShareRecords(start)
                part.wake()

    async def _write_reset(self, group_id: str, topic: str, number: int,
                           start: int | None) -> None:
        if start is None:
            await self._store.delete_records(group_id, topic, number)
        else:
            await self._store.write_records(group_id, topic, number, ShareRecords(start))

    def get(self, group_id: str, topic: str, number: int) -> SharePartition | None:
        """The share partition if loaded here."""
        return self._parts.get((group_id, topic, number))

    def member_gone(self, group_id: str, member_id: str) -> None:
        """Release every record the member holds (it left or its session ended)."""
        limit = self._config_of(group_id).delivery_count_limit
        for part in self.of_group(group_id):
            if part.records.release(limit, member_id=member_id):
                part.wake()

    # ------------------------------------------------------------ fetching

    async def fetch(self, part: SharePartition, segment: SegmentHandle, member_id: str,
                    max_records: int, max_bytes: int, *, record_limit: bool = False,
                    ) -> Acquired:
        """Acquire records for ``member_id`` (module docstring); raises what reads raise.

        ``record_limit`` (ShareFetch v2's record-limit mode, KIP-1206): at most
        ``max_records`` acquired, a run or a block cut after them (the whole
        block is still sent: the client keeps only the acquired offsets); else
        whole blocks, which may go over (batch-optimized, as Kafka).
        """
        config = self._config_of(part.group_id)
        isolation = self.isolation_of(part.group_id)
        loop = asyncio.get_running_loop()
        now = loop.time()
        deadline = now + config.record_lock_duration_ms / 1000
        acquired = Acquired()
        async with part.lock:
            records = part.records
            info = segment.info().segment
            records.move_start(info.start_offset)
            records.release(config.delivery_count_limit, now=now)
            count = 0
            for run in records.available():
                if count >= max_records or acquired.size >= max_bytes:
                    break
                if record_limit and run.last - run.first + 1 > max_records - count:
                    records.split_at(run.first + max_records - count)  # ``run``: the head
                blocks = await _read_range(segment, run.first, run.last, isolation)
                records.acquire(run, member_id, deadline)
                acquired.ranges.append((run.first, run.last, run.delivery_count))
                _add_blocks(acquired, blocks)
                count += run.last - run.first + 1
            # (an end past the log's: state of a topic deleted and made again whose
            # share partitions could not be deleted; nothing to read until it is reached)
            if count < max_records and records.in_flight() < config.max_in_flight \
                    and records.end <= info.end_offset:
                # At most ``_READ_BYTES`` read (a plain Fetch's partition_max_bytes):
                # the blocks past ``max_records`` would be read only to be dropped.
                batch = await segment.read(
                    records.end, max(min(max_bytes - acquired.size, _READ_BYTES), 1), isolation)
                taken_all = True
                for block in batch.blocks:
                    last = block.offset + block.event_count - 1
                    if last < records.end:
                        continue
                    if count >= max_records or records.in_flight() >= config.max_in_flight:
                        taken_all = False
                        break
                    first = max(block.offset, records.end)
                    if record_limit and last - first + 1 > max_records - count:
                        # The rest of the block stays past the end, fetched next time.
                        last = first + max_records - count - 1
                        taken_all = False
                    records.add(first, last, member_id, deadline)
                    acquired.ranges.append((first, last, 1))
                    _add_blocks(acquired, [block])
                    count += last - first + 1
                if taken_all and batch.next_offset > records.end:
                    records.add(records.end, batch.next_offset - 1, None, 0.0)
        if record_limit:  # one range where they touch, as Kafka answers this mode
            acquired.ranges = _joined(acquired.ranges)
        return acquired

    def may_read_more(self, part: SharePartition) -> bool:
        """Whether a fetch would read new records (fewer than ``max_in_flight`` in flight):
        a waiting fetch waits for new data only then, else for releases and lock expiries
        (data past the end would wake it again and again)."""
        return part.records.in_flight() < self._config_of(part.group_id).max_in_flight

    def isolation_of(self, group_id: str) -> Isolation:
        """What the group reads (``share.isolation.level``)."""
        return (Isolation.READ_COMMITTED
                if self._config_of(group_id).isolation_level == "read_committed"
                else Isolation.READ_UNCOMMITTED)

    def next_deadline(self, parts: list[SharePartition]) -> float | None:
        """The earliest lock deadline among ``parts``."""
        deadlines = [d for d in (p.records.next_deadline() for p in parts) if d is not None]
        return min(deadlines) if deadlines else None

    # ------------------------------------------------------------ acknowledging

    async def acknowledge(self, part: SharePartition, member_id: str,
                          batches: list[AckBatch], *, renew: bool = False,
                          ) -> tuple[ErrorCode, str | None]:
        """Apply and write the member's acknowledgements; the partition's error, if any.

        ``renew``: RENEW (4) is a type of the request's version (v2, KIP-1222): the
        records' locks start again, nothing is written for them (as Kafka, a lock is
        never durable); else it is an unknown type, INVALID_REQUEST.
        """
        known = {kind.value for kind in AckType if renew or kind is not AckType.RENEW}
        for first, last, types in batches:
            if first > last or not types or (len(types) != 1 and len(types) != last - first + 1):
                return ErrorCode.invalid_request, (
                    f"acknowledgement batch {first}-{last} has {len(types)} types")
            if any(kind not in known for kind in types):
                return ErrorCode.invalid_request, (
                    f"unknown acknowledge type in {types}"
                    + ("" if renew else " (RENEW, 4, needs version 2)"))
        config = self._config_of(part.group_id)
        deadline = asyncio.get_running_loop().time() + config.record_lock_duration_ms / 1000
        failure: tuple[ErrorCode, str | None] = (ErrorCode.none, None)
        async with part.lock:
            for first, last, types in batches:
                try:
                    for low, high, kind in _spans(first, last, types):
                        part.records.acknowledge(member_id, low, high, AckType(kind),
                                                 config.delivery_count_limit, deadline)
                except RecordStateError as error:
                    failure = (ErrorCode.invalid_record_state, str(error))
                    break
            if all(kind == AckType.RENEW for _, _, types in batches for kind in types):
                return failure  # locks only: nothing to write, no fetch to wake
            # Released records, or a start moved (room for more in flight): waiting
            # fetches look again.
            part.wake()
            try:
                await self._store.write_records(part.group_id, part.topic, part.partition,
                                                part.records)
            except (BrokerError, LedgerError) as error:
                # Unknown outcome: maybe durable (module docstring, crash windows).
                code = (ErrorCode.kafka_storage_error if isinstance(error, LedgerError)
                        else error_code(error))
                return code, str(error)
        return failure

    async def close_member(self, part: SharePartition, member_id: str) -> None:
        """The member's share session closed: release what it holds here."""
        if part.records.release(self._config_of(part.group_id).delivery_count_limit,
                                member_id=member_id):
            part.wake()


def _joined(ranges: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """Acquired (first, last, delivery count) ranges, neighbours of one count joined."""
    joined: list[tuple[int, int, int]] = []
    for first, last, count in ranges:
        if joined and joined[-1][1] + 1 == first and joined[-1][2] == count:
            joined[-1] = (joined[-1][0], last, count)
        else:
            joined.append((first, last, count))
    return joined


def _spans(first: int, last: int, types: tuple[int, ...]) -> list[tuple[int, int, int]]:
    """(first, last, type) runs of one batch: one for a single type, else per equal types."""
    if len(types) == 1:
        return [(first, last, types[0])]
    spans: list[tuple[int, int, int]] = []
    for index, kind in enumerate(types):
        offset = first + index
        if spans and spans[-1][2] == kind and spans[-1][1] == offset - 1:
            spans[-1] = (spans[-1][0], offset, kind)
        else:
            spans.append((offset, offset, kind))
    return spans


def _add_blocks(acquired: Acquired, blocks: list[ReadBlock]) -> None:
    for block in blocks:
        batch = batch_of_block(block)
        acquired.batches.append(batch)
        acquired.size += len(batch)


async def _read_range(segment: SegmentHandle, first: int, last: int,
                      isolation: Isolation) -> list[ReadBlock]:
    """The blocks holding records ``first..last`` (whole blocks)."""
    blocks: list[ReadBlock] = []
    offset = first
    while offset <= last:
        batch = await segment.read(offset, _READ_BYTES, isolation)
        if not batch.blocks:
            break
        for block in batch.blocks:
            if block.offset > last:
                return blocks
            if block.offset + block.event_count > offset:
                blocks.append(block)
        offset = batch.blocks[-1].offset + batch.blocks[-1].event_count
    return blocks
