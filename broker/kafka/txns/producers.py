"""Transactional ids: producer fencing by epoch, Folio transactions, offsets sent with them.

``TxnProducers`` answers the transaction APIs with Kafka error codes (never
raises for client input):

- ``init`` (InitProducerId with a transactional id): a known id keeps its
  producer id with the epoch bumped (a new id gets one from
  ``ProducerIds``); the Folio transaction the older epoch left open is
  aborted first, so a restarted producer starts clean and the old one is
  fenced: its requests carry the old epoch and get PRODUCER_FENCED (Produce:
  INVALID_PRODUCER_EPOCH), and its in-flight appends fail as their
  transaction is no longer OPEN.
- ``begin`` (AddPartitionsToTxn, AddOffsetsToTxn): begins the Folio
  transaction with the producer's timeout if none is open; records the
  partitions added, which ``verify`` checks (KIP-890; Produce v12+ adds).
- ``append_check``: the Folio transaction a transactional batch belongs to.
- ``add_offsets`` (TxnOffsetCommit): offsets kept pending, recorded.
- ``end`` (EndTxn): commit or abort through the coordinator; on commit the
  pending offsets are then written to the groups' committed offsets; v5
  bumps the epoch (``broker.kafka.txns.versions``).

Crash windows: the commit is decided by the coordinator's COMMITTING record. A
crash after it and before the pending offsets reached ``_kafka_offsets`` is closed
by ``start``: a record whose transaction committed gets its offsets written then;
one whose transaction aborted is cleared. A transaction still OPEN after a restart
stays open (the producer may go on, or its timeout aborts it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable

from kio.schema.errors import ErrorCode

from broker.errors import BrokerError, BrokerShuttingDownError, TxnNotFoundError, TxnStateError
from broker.kafka.consumer_groups.coordinator import GroupCoordinator, OffsetCommitItem
from broker.kafka.consumer_groups.offsets import TopicPartition
from broker.kafka.producer_ids import ProducerIds
from broker.kafka.txns.answers import OffsetsNotWrittenError, group_offset_errors, retriable
from broker.kafka.txns.drives import Drives
from broker.kafka.txns.phases import ABORTED, COMMITTED, FINISHING, pending_partitions
from broker.kafka.txns.records import (
    MAX_TRANSACTIONAL_ID_BYTES,
    TXN_STATE_TOPIC,
    AddedPartition,
    TxnProducer,
    decode_all,
)
from broker.kafka.txns.versions import bump, end_retry, verified
from broker.system.compacted_topic import CompactedTopic
from broker.topics.manager import TopicManager
from broker.txn.coordinator import TxnCoordinator, TxnState, TxnStatus
from ledger.errors import LedgerError
from txnbuffer.api import TxnId

__all__ = ["MAX_KAFKA_TXN_TIMEOUT_MS", "OffsetsWriter", "TxnProducers"]

log = logging.getLogger(__name__)

#: Kafka's ``transaction.max.timeout.ms`` default: longer asks get INVALID_TRANSACTION_TIMEOUT.
MAX_KAFKA_TXN_TIMEOUT_MS = 900_000
_MAX_EPOCH = 32767
#: Backoff of the drive that writes a committed transaction's offsets no call finished.
_OFFSETS_RETRY_FIRST_S = 0.2
_OFFSETS_RETRY_MAX_S = 5.0

#: Writes a committed transaction's offsets into a group's committed offsets,
#: wherever the group is coordinated: the error of each partition.
OffsetsWriter = Callable[[str, list[OffsetCommitItem]],
                         Awaitable[dict[TopicPartition, ErrorCode]]]


class TxnProducers:
    """Every transactional id this broker coordinates."""

    def __init__(self, topics: TopicManager, coordinator: TxnCoordinator,
                 producer_ids: ProducerIds, groups: GroupCoordinator,
                 write_offsets: OffsetsWriter | None = None) -> None:
        self._log = CompactedTopic(topics, TXN_STATE_TOPIC)
        self.coordinator = coordinator
        self._producer_ids = producer_ids
        self._groups = groups
        self._write_offsets = write_offsets or self._write_local_offsets
        self._producers: dict[str, TxnProducer] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        #: Drives writing committed transactions' offsets no call finished.
        self._drives = Drives(self._drive_step, _OFFSETS_RETRY_FIRST_S, _OFFSETS_RETRY_MAX_S)
        #: The records are loaded and served (a cluster: while the coordinator runs here).
        self.loaded = False
        #: Records may be written (False once stood down, until taken over again).
        self._active = True
        groups.pending_txn_offsets = self.pending_offsets

    def route_offsets(self, write_offsets: OffsetsWriter) -> None:
        """Write committed offsets through ``write_offsets`` (a cluster: at the group's broker)."""
        self._write_offsets = write_offsets

    @property
    def log_segment(self) -> str:
        """The segment of ``_kafka_txn_state`` (placed with the transaction coordinator)."""
        return self._log.segment_name

    async def take_over(self) -> None:
        """Forget what is in memory, load the records again (cluster: the coordinator came here).

        The caller unloaded the record's segment first, so it loads afresh
        (recovery fences the previous coordinator's ledger) and every record
        the previous coordinator wrote is read, as at startup.
        """
        self.stand_down()
        self._active = True
        await self.start()

    def stand_down(self) -> None:
        """Serve nothing, keep nothing (cluster: the coordinator runs elsewhere).

        The drives of pending offsets are cancelled: whoever takes over reads
        the records and drives them again.
        """
        self.loaded = False
        self._active = False
        self._drives.cancel_all()
        self._producers.clear()
        self._locks.clear()
        self._log.forget()

    async def _save(self, producer: TxnProducer) -> None:
        """Write the producer's record, only while this broker coordinates (never fence the next).

        Raises ``BrokerShuttingDownError`` once stood down: its segment now
        belongs to the broker the coordinator moved to.
        """
        if not self._active or producer.expired:
            raise BrokerShuttingDownError(
                "the transactional id expired" if producer.expired
                else "the Kafka transaction coordinator moved to another broker")
        producer.last_update_ms = int(time.time() * 1000)
        await self._log.write(producer.key, producer.encode())

    async def expire(self, transactional_id: str, expired: Callable[[TxnProducer], bool],
                     ) -> bool:
        """Forget ``transactional_id`` if ``expired`` says so under its lock (``expiry``).

        A tombstone first, so no restart or next coordinator brings it back;
        raises what its write raises (kept: the next sweep tries again).
        """
        async with self._lock(transactional_id):
            producer = self._producers.get(transactional_id)
            if (producer is None or not self.loaded or not self._active
                    or not expired(producer)):
                return False
            await self._log.write(producer.key, None)
            producer.expired = True
            del self._producers[transactional_id]
            return True

    async def _write_local_offsets(self, group: str, items: list[OffsetCommitItem],
                                   ) -> dict[TopicPartition, ErrorCode]:
        errors = {(item.topic, item.partition): ErrorCode.none for item in items}
        return await self._groups.write_offsets(group, items, errors)

    async def start(self) -> None:
        """Load the records; finish what a crash left between a decision and its offsets."""
        self._producers.update(decode_all(await self._log.read_prefix("")))
        for producer in list(self._producers.values()):
            if producer.txn_id is None:
                continue
            state = self._state(producer.txn_id)
            try:
                if state in COMMITTED:
                    log.info("kafka transactions: %s committed before a restart; writing "
                             "its %d offsets", producer.transactional_id, len(producer.offsets))
                    await self._finish(producer, "commit")
                elif state is None or state in ABORTED:
                    await self._finish(producer, "abort")
            except (BrokerError, LedgerError, OffsetsNotWrittenError) as error:
                # Kept as it is, and driven on: its next EndTxn, InitProducerId or
                # the drive finishes it.
                log.warning("kafka transactions: finishing %s after a restart failed: %s",
                            producer.transactional_id, error)
                self._drive_later(producer.transactional_id)
        self.loaded = True

    def _drive_later(self, transactional_id: str) -> None:
        """Finish a decided transaction's record (its offsets) with backoff until it is done.

        Rule: a COMMITTING state is driven to its end, not only when the
        producer comes back. Stops with ``stand_down`` (the next coordinator
        drives it from the record).
        """
        self._drives.start(transactional_id)

    async def _drive_step(self, transactional_id: str, delay_s: float) -> bool:
        """One attempt of ``_drive_later``: True once there is nothing left to do."""
        async with self._lock(transactional_id):
            producer = self._producers.get(transactional_id)
            if producer is None or producer.txn_id is None:
                return True
            state = self._state(producer.txn_id)
            if state is TxnState.OPEN:
                return True  # not decided: the producer (or its timeout) ends it
            if state in FINISHING and state is not TxnState.COMMITTING:
                return False  # its abort markers first
            try:
                await self._finish(producer, "commit" if state in COMMITTED else "abort")
                return True
            except (BrokerError, LedgerError, OffsetsNotWrittenError) as error:
                log.info("kafka transactions: %s not finished yet (%s); again in %.1f s",
                         transactional_id, error, delay_s)
                return False

    def _state(self, txn_id: TxnId) -> TxnState | None:
        try:
            return self.coordinator.status(txn_id).state
        except TxnNotFoundError:
            return None

    def _lock(self, transactional_id: str) -> asyncio.Lock:
        return self._locks.setdefault(transactional_id, asyncio.Lock())

    # ------------------------------------------------------------ descriptions

    def described(self) -> list[TxnProducer]:
        """Every transactional id's state now (DescribeTransactions, ListTransactions)."""
        return list(self._producers.values())

    def transaction_status(self, producer: TxnProducer) -> TxnStatus | None:
        """The coordinator's status of the producer's open transaction; None if it has none."""
        if producer.txn_id is None:
            return None
        try:
            return self.coordinator.status(producer.txn_id)
        except TxnNotFoundError:
            return None

    # ------------------------------------------------------------ checks

    def check(self, transactional_id: str | None, producer_id: int, epoch: int,
              ) -> tuple[ErrorCode, TxnProducer | None]:
        """The producer's state if (id, epoch) is its current one, else the error."""
        if not transactional_id:
            return ErrorCode.invalid_request, None
        producer = self._producers.get(transactional_id)
        if producer is None or producer.producer_id != producer_id:
            return ErrorCode.invalid_producer_id_mapping, None
        if epoch != producer.epoch:
            return ErrorCode.producer_fenced, None
        return ErrorCode.none, producer

    def pending_offsets(self, group_id: str) -> set[TopicPartition]:
        """Partitions of ``group_id`` with offsets not yet stable (``phases``)."""
        return pending_partitions(self._producers.values(), self._state, group_id)

    # ------------------------------------------------------------ InitProducerId

    async def init(self, transactional_id: str, timeout_ms: int, producer_id: int,
                   epoch: int) -> tuple[ErrorCode, int, int]:
        """InitProducerId with a transactional id: (error, producer id, epoch)."""
        if len(transactional_id.encode()) > MAX_TRANSACTIONAL_ID_BYTES:
            return ErrorCode.invalid_request, -1, -1
        if not 0 < timeout_ms <= MAX_KAFKA_TXN_TIMEOUT_MS:
            return ErrorCode.invalid_transaction_timeout, -1, -1
        async with self._lock(transactional_id):
            producer = self._producers.get(transactional_id)
            if producer_id >= 0:  # KIP-360: a producer asking to bump its own epoch
                if producer is None or producer.producer_id != producer_id:
                    return ErrorCode.invalid_producer_id_mapping, -1, -1
                if epoch != producer.epoch:
                    return ErrorCode.producer_fenced, -1, -1
            try:
                if producer is not None and producer.txn_id is not None:
                    await self._abort_left_open(producer, producer.txn_id)
                if producer is None or producer.epoch >= _MAX_EPOCH:
                    new_id = await self._producer_ids.next_id()
                    producer = TxnProducer(transactional_id, new_id, 0, timeout_ms)
                else:
                    producer = TxnProducer(transactional_id, producer.producer_id,
                                           producer.epoch + 1, timeout_ms)
                await self._save(producer)
            except OffsetsNotWrittenError:
                return ErrorCode.coordinator_not_available, -1, -1
            except (BrokerError, LedgerError) as error:
                return retriable(error), -1, -1
            self._producers[transactional_id] = producer
            log.info("kafka transactions: %s is producer %d epoch %d", transactional_id,
                     producer.producer_id, producer.epoch)
            return ErrorCode.none, producer.producer_id, producer.epoch

    async def _abort_left_open(self, producer: TxnProducer, txn_id: TxnId) -> None:
        """End what the previous epoch left: abort an open transaction, finish a decided one."""
        state = self._state(txn_id)
        if state is TxnState.OPEN:
            log.info("kafka transactions: %s re-initialised: aborting the transaction its "
                     "epoch %d left open", producer.transactional_id, producer.epoch)
            with contextlib.suppress(TxnStateError):  # decided meanwhile: looked at below
                await self.coordinator.abort(txn_id)
            state = self._state(txn_id)
        await self._finish(producer, "commit" if state in COMMITTED else "abort")

    # ------------------------------------------------------------ a transaction

    async def begin(self, transactional_id: str | None, producer_id: int, epoch: int,
                    group_id: str | None = None,
                    partitions: Iterable[AddedPartition] = ()) -> ErrorCode:
        """AddPartitionsToTxn / AddOffsetsToTxn: the Folio transaction is open after it."""
        code, producer = self.check(transactional_id, producer_id, epoch)
        if producer is None:
            return code
        async with self._lock(producer.transactional_id):
            added, new = set(partitions) - producer.partitions, producer.txn_id is None
            if producer.txn_id is not None:
                if self._state(producer.txn_id) is not TxnState.OPEN:
                    return ErrorCode.invalid_txn_state  # timed out: the producer aborts
            elif (producer.last_txn_id is not None and not producer.last_markers_written
                  and self._state(producer.last_txn_id) in FINISHING):
                # The last one's markers are not all written: a partition owner
                # must never take a batch of the next one for the last one's
                # (docs/kafka.md, "Clusters"). Kafka answers so too; clients retry.
                return ErrorCode.concurrent_transactions
            if new or added:
                try:
                    if new:
                        producer.txn_id = await self.coordinator.begin(producer.timeout_ms)
                        producer.partitions = set()
                    producer.partitions |= added
                    await self._save(producer)
                except (BrokerError, LedgerError) as error:
                    producer.txn_id = None if new else producer.txn_id
                    producer.partitions -= added  # (maybe recorded: added again)
                    return retriable(error)
                producer.last_end = None if new else producer.last_end
            if group_id is not None:
                producer.groups.add(group_id)
            return ErrorCode.none

    def verify(self, transactional_id: str | None, producer_id: int, epoch: int,
               partitions: list[AddedPartition]) -> dict[AddedPartition, ErrorCode]:
        """Whether each partition is in the open transaction (``broker.kafka.txns.versions``)."""
        code, producer = self.check(transactional_id, producer_id, epoch)
        return verified(producer, code, partitions, self._state)

    def producer(self, transactional_id: str | None) -> TxnProducer | None:
        """The state of ``transactional_id`` now (read only), None if unknown."""
        return self._producers.get(transactional_id or "")

    def append_check(self, transactional_id: str | None, producer_id: int, epoch: int,
                     ) -> tuple[ErrorCode, TxnId | None]:
        """(NONE, Folio txn id) for a transactional batch, else (error, None)."""
        code, producer = self.check(transactional_id, producer_id, epoch)
        if producer is None:
            return (ErrorCode.invalid_producer_epoch if code is ErrorCode.producer_fenced
                    else code), None
        if producer.txn_id is None:
            return ErrorCode.invalid_txn_state, None
        return ErrorCode.none, producer.txn_id

    async def add_offsets(self, transactional_id: str, producer_id: int, epoch: int,
                          group_id: str, generation: int, member_id: str,
                          items: list[OffsetCommitItem],
                          group_instance_id: str | None = None,
                          ) -> dict[TopicPartition, ErrorCode]:
        """TxnOffsetCommit on one broker: the group's checks, then ``keep_offsets``."""
        code, producer = self.check(transactional_id, producer_id, epoch)
        if producer is not None and (producer.txn_id is None
                                     or self._state(producer.txn_id) is not TxnState.OPEN):
            code, producer = ErrorCode.invalid_txn_state, None
        if producer is None:
            return {(item.topic, item.partition): code for item in items}
        errors = await group_offset_errors(self._groups, group_id, generation, member_id,
                                           items, group_instance_id)
        good = [item for item in items
                if errors[(item.topic, item.partition)] is ErrorCode.none]
        if good:
            errors.update(await self.keep_offsets(transactional_id, producer_id, epoch,
                                                  group_id, good))
        return errors

    async def keep_offsets(self, transactional_id: str, producer_id: int, epoch: int,
                           group_id: str, items: list[OffsetCommitItem],
                           ) -> dict[TopicPartition, ErrorCode]:
        """Keep offsets the group's coordinator accepted until the transaction commits.

        The same offsets kept again change nothing (a call whose answer was lost).
        """
        code, producer = self.check(transactional_id, producer_id, epoch)
        if producer is not None and (producer.txn_id is None
                                     or self._state(producer.txn_id) is not TxnState.OPEN):
            code, producer = ErrorCode.invalid_txn_state, None
        if producer is None:
            return {(item.topic, item.partition): code for item in items}
        errors = {(item.topic, item.partition): ErrorCode.none for item in items}
        async with self._lock(producer.transactional_id):
            for item in items:
                if errors[(item.topic, item.partition)] is ErrorCode.none:
                    producer.offsets[(group_id, item.topic, item.partition)] = item.offset
            producer.groups.add(group_id)
            try:
                await self._save(producer)
            except (BrokerError, LedgerError) as error:
                return {tp: retriable(error) if value is ErrorCode.none else value
                        for tp, value in errors.items()}
        return errors

    async def end(self, transactional_id: str, producer_id: int, epoch: int,
                  commit: bool, bump_epoch: bool = False) -> ErrorCode:
        """EndTxn: commit or abort the open transaction (and write its offsets on commit).

        ``bump_epoch`` (EndTxn v5): the epoch bumped as it ends (``versions``). Checked
        under the id's lock: an end or InitProducerId under way may change the epoch.
        """
        if transactional_id not in self._producers:
            return self.check(transactional_id, producer_id, epoch)[0]
        outcome = "commit" if commit else "abort"
        async with self._lock(transactional_id):
            known = self._producers.get(transactional_id) if bump_epoch else None
            retry = None if known is None else end_retry(known, producer_id, epoch, commit)
            if retry is not None:
                return retry
            code, producer = self.check(transactional_id, producer_id, epoch)
            if producer is None:
                return code
            markers_written = False
            try:
                if producer.txn_id is None:
                    # Nothing begun (an empty transaction), or a retry of the end just
                    # made (v5: whose bump was not recorded; bumped now).
                    if producer.last_end not in (None, outcome):
                        return ErrorCode.invalid_txn_state
                    if bump_epoch:
                        await bump(producer, self._producer_ids.next_id)
                        await self._save(producer)
                    return ErrorCode.none
                state = self._state(producer.txn_id)
                if state is TxnState.OPEN:
                    if commit:  # answered once its markers are durable (its record follows)
                        await self.coordinator.commit([producer.txn_id])
                    else:  # answered after ABORT_ANSWER_WAIT_S even if they are not
                        await self.coordinator.abort(producer.txn_id)
                    state = self._state(producer.txn_id)
                    markers_written = commit or state not in FINISHING
                decided = "commit" if state in COMMITTED else "abort"
                if decided != outcome:
                    # Its timeout aborted it: the producer must abort.
                    return ErrorCode.invalid_txn_state
                await self._finish(producer, decided, bump_epoch)
                producer.last_markers_written = markers_written
            except TxnStateError:
                return ErrorCode.invalid_txn_state
            except OffsetsNotWrittenError:
                self._drive_later(producer.transactional_id)
                return ErrorCode.coordinator_not_available
            except (BrokerError, LedgerError) as error:
                if producer.txn_id is not None and self._state(producer.txn_id) not in (
                        None, TxnState.OPEN):  # decided: its record is finished anyway
                    self._drive_later(producer.transactional_id)
                return retriable(error)
            return ErrorCode.none

    async def _finish(self, producer: TxnProducer, outcome: str,
                      bump_epoch: bool = False) -> None:
        """Write a committed transaction's offsets, then clear it (and bump its epoch)."""
        if outcome == "commit" and producer.offsets:
            by_group: dict[str, list[OffsetCommitItem]] = {}
            for (group, topic, partition), value in producer.offsets.items():
                by_group.setdefault(group, []).append(OffsetCommitItem(topic, partition, value))
            for group, items in by_group.items():
                # Maybe applied when this raises or a partition failed (a lost
                # answer): the same absolute offsets are written again, harmless.
                try:
                    result = await self._write_offsets(group, items)
                except (BrokerError, LedgerError) as error:
                    log.info("kafka transactions: offsets of group %s not written: %s",
                             group, error)
                    raise OffsetsNotWrittenError(group, len(items)) from error
                failed = [tp for tp, value in result.items() if value is not ErrorCode.none]
                if failed:
                    # Kept in the record: the next start (or EndTxn retry) writes them.
                    raise OffsetsNotWrittenError(group, len(failed))
        producer.last_txn_id = producer.txn_id
        producer.last_markers_written = False  # (``end`` knows better, and says so)
        producer.txn_id = None
        producer.offsets = {}
        producer.groups = set()
        producer.partitions, producer.last_end, producer.ended_with = set(), outcome, None
        if bump_epoch:
            await bump(producer, self._producer_ids.next_id)
        await self._save(producer)
