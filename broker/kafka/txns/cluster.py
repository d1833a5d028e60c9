"""Kafka transactions on a multi-broker cluster: one coordinator, partitions and groups anywhere.

The Kafka transaction coordinator of every transactional id runs beside
Folio's transaction coordinator, on the owner of the container of
``_txnlog/0``; ``_kafka_txn_state`` is placed in that container too
(``broker.cluster.containers``), so that broker owns every record it writes.
``ClusterTxns`` is each cluster broker's part (docs/kafka.md, "Clusters"):

- **Coordinator.** FindCoordinator(TRANSACTION) names the coordinator's
  broker; transaction requests elsewhere answer NOT_COORDINATOR. When the
  coordinator is seated here (``ClusterOwnership`` took the container over
  and Folio's coordinator replayed its log) ``seated`` loads the records
  afresh (``TxnProducers.take_over``: the segment is unloaded first, so
  recovery fences the previous broker's ledger), retried while the
  coordinator stays here; until loaded, requests answer NOT_COORDINATOR.
  ``stood_down`` drops them at once when the container goes.
- **Partitions on other brokers.** A transactional batch reaches the
  partition's owner. It asks the coordinator to check its partition (KIP-890
  part 1: added to the open transaction, else refused) or, from Produce v12
  (transaction version 2), to add it (``FindKafkaTxn`` with the partition;
  ``check_partition``). It then asks the coordinator for the producer's open Folio
  transaction (``FindKafkaTxn``; in process when it runs here), per batch, so
  a batch is never taken for a transaction that ended, then appends through
  the ``TxnParticipant`` as every transactional append of a cluster broker
  does: the segment registered with the coordinator first, its marker
  written here when the transaction is decided.
- **Offsets into a group another broker coordinates.** TxnOffsetCommit goes
  to the group's coordinator, which checks the member (KIP-447) and the
  partitions, then hands the offsets to the transaction coordinator
  (``AddKafkaTxnOffsets``), which keeps them pending in the producer's
  record. Once the transaction commits the coordinator writes them at the
  group's coordinator (``CommitKafkaTxnOffsets``, the owner of the group's
  ``_kafka_offsets/<container>``).
- **``require_stable`` at a group's coordinator.** The offsets a transaction
  holds are known only to the transaction coordinator until they are
  written to the group, so an OffsetFetch with ``require_stable`` asks it
  (``PendingKafkaTxnOffsets``, in process when it runs here) which of the
  group's partitions a transaction not yet decided, being committed, or
  committed with offsets not yet written holds: those answer
  UNSTABLE_OFFSET_COMMIT (retriable: the consumer asks again). Pulled at the
  fetch, not pushed at AddKafkaTxnOffsets, so nothing is left to reconcile
  when the coordinator moves: the new one answers from the records it
  loaded.

Unknown outcomes: ``FindKafkaTxn`` is a read (asked again); with a partition
to add, the add is idempotent (asked again: the partition added once). A lost answer of
``AddKafkaTxnOffsets`` is answered retriable to the client, which sends the
same offsets again (kept once). A lost answer of ``CommitKafkaTxnOffsets``
leaves the offsets in the record: they are written again (absolute values,
the same record) by the EndTxn retry or the coordinator's drive until every
partition is acknowledged; the record is cleared only then.
``PendingKafkaTxnOffsets`` is a read, asked again for up to
``STABLE_TIMEOUT_S``; unanswered, every partition asked is answered
UNSTABLE_OFFSET_COMMIT: never "stable" without the coordinator's word.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Final, TypeVar

from kio.schema.errors import ErrorCode

from broker.cluster.containers import COORDINATOR_SEGMENT
from broker.cluster.kafka_txns import TxnOffset
from broker.cluster.peers import PeerClients
from broker.cluster.txn_routes import ClusterTxnRoutes
from broker.cluster.zookeeper_owners import ZooKeeperOwners
from broker.errors import (
    BrokerError,
    BrokerShuttingDownError,
    TxnNotFoundError,
    TxnStateError,
    WrongHostError,
)
from broker.kafka.consumer_groups.coordinator import GroupCoordinator, OffsetCommitItem
from broker.kafka.consumer_groups.offsets import OFFSETS_TOPIC, CommittedOffset, TopicPartition
from broker.kafka.locator import GROUP_KEY, container_of
from broker.kafka.txns.implicit import check_partition
from broker.kafka.txns.implicit import keep_offsets as keep_implicit
from broker.kafka.txns.producers import TxnProducers
from broker.kafka.txns.records import AddedPartition
from broker.topics.manager import TopicManager
from ledger.errors import LedgerError
from txnbuffer.api import TxnId

__all__ = ["ABORT_TIMEOUT_S", "FIND_TIMEOUT_S", "STABLE_TIMEOUT_S", "ClusterTxns"]

log = logging.getLogger(__name__)

#: How long a transactional batch waits for the coordinator (moving, loading) before
#: it is refused retriable (NOT_ENOUGH_REPLICAS: nothing written, the producer resends).
FIND_TIMEOUT_S: Final = 10.0
#: How long the abort of a transaction with a batch of unknown outcome is tried.
ABORT_TIMEOUT_S: Final = 10.0
#: How long an OffsetFetch with ``require_stable`` waits for the coordinator's answer
#: before its partitions are answered UNSTABLE_OFFSET_COMMIT (the consumer asks again).
STABLE_TIMEOUT_S: Final = 3.0
_FIRST_DELAY_S: Final = 0.05
_MAX_DELAY_S: Final = 1.0
_LOAD_RETRY_S: Final = 1.0

_T = TypeVar("_T")

#: ``broker.kafka.context.TxnWrite`` (the context sits above this package).
TxnWrite = tuple[TxnId, AbstractAsyncContextManager[None]]


class ClusterTxns:
    """The Kafka transactions of one cluster broker (see the module docstring).

    Args:
        producers: the transactional ids (served while the coordinator runs here).
        groups: the consumer groups this broker coordinates.
        topics: the broker's topic manager (the record's segment is unloaded on take-over).
        routes: the transactions' routes (the participant that appends, the peers).
        owners: ownership as this broker knows it (owner cache).
        peers: clients of the other brokers.
        coordinator_here: whether Folio's transaction coordinator runs here now.
        group_here: whether a consumer group is coordinated here now.
        container_count: the cluster's containers.
    """

    def __init__(self, producers: TxnProducers, groups: GroupCoordinator,
                 topics: TopicManager, routes: ClusterTxnRoutes, owners: ZooKeeperOwners,
                 peers: PeerClients, coordinator_here: Callable[[], bool],
                 group_here: Callable[[str], bool], container_count: int) -> None:
        self._producers = producers
        self._groups = groups
        self._topics = topics
        self._routes = routes
        self._owners = owners
        self._peers = peers
        self._coordinator_here = coordinator_here
        self._group_here = group_here
        self._count = container_count
        self._load: asyncio.Task[None] | None = None

    # -- where the coordinator is ---------------------------------------------------

    def here(self) -> bool:
        """Whether the Kafka transaction coordinator runs here now (seated and loaded)."""
        return self._coordinator_here() and self._producers.loaded

    def _wrong_host(self) -> WrongHostError:
        return WrongHostError(COORDINATOR_SEGMENT, self._owners.owner_of(COORDINATOR_SEGMENT))

    async def seated(self) -> None:
        """Folio's coordinator was taken over here: load the records (in the background)."""
        self.stood_down()
        self._load = asyncio.get_running_loop().create_task(self._take_over())

    def stood_down(self) -> None:
        """The coordinator runs elsewhere now: serve and keep nothing."""
        if self._load is not None:
            self._load.cancel()
            self._load = None
        self._producers.stand_down()

    async def _take_over(self) -> None:
        segment = self._producers.log_segment
        while self._coordinator_here():
            try:
                await self._topics.release_segments(lambda name: name == segment)
                await self._producers.take_over()
            except Exception as error:  # retried: the coordinator is ours, its ids must load
                self._producers.stand_down()
                log.warning("kafka transactional ids not loaded (%s: %s); retrying",
                            type(error).__name__, error)
                await asyncio.sleep(_LOAD_RETRY_S)
                continue
            if not self._coordinator_here():  # moved on meanwhile
                self._producers.stand_down()
            else:
                log.info("kafka transaction coordinator: %d transactional ids loaded",
                         len(self._producers.described()))
            return

    async def close(self) -> None:
        """Cancel a load under way and wait for it (the listener stops)."""
        load, self._load = self._load, None
        if load is not None:
            load.cancel()
            await asyncio.wait({load})

    # -- a partition owner's transactional batch -------------------------------------

    async def transactional_write(self, context: Any, transactional_id: str | None,
                                  segment_name: str, header: Any,
                                  ) -> tuple[ErrorCode, str | None, TxnWrite | None]:
        """``KafkaContext.transactional_write`` of a cluster broker (module docstring)."""
        del context
        code, txn_id = await self._find(transactional_id or "", header.producer_id,
                                        header.producer_epoch)
        if txn_id is None:
            return code, f"transactional batch refused: {code.name}", None
        # The loaded segment the registration is made for: after the segment went
        # to another broker and came back (a new load), the first batch registers
        # again, and the coordinator refuses a transaction decided meanwhile
        # (``broker.txn.participant``). Looked up, never loaded here.
        loaded = next((segment for segment in self._topics.loaded_segments()
                       if segment.name == segment_name), None)
        return ErrorCode.none, None, (txn_id, self._routes.participant.writing(
            txn_id, segment_name, loaded))

    async def _find(self, transactional_id: str, producer_id: int,
                    epoch: int) -> tuple[ErrorCode, TxnId | None]:
        """The producer's open Folio transaction, asked of the coordinator wherever it runs."""
        async def local() -> tuple[ErrorCode, TxnId | None]:
            return self._producers.append_check(transactional_id, producer_id, epoch)

        async def remote(owner: str) -> tuple[ErrorCode, TxnId | None]:
            number, txn_id = await self._peers.find_kafka_txn(
                owner, transactional_id, producer_id, epoch)
            return ErrorCode(number), txn_id

        found = await self._ask(transactional_id, local, remote)
        return (ErrorCode.not_enough_replicas, None) if found is None else found

    async def check_partition(self, transactional_id: str, producer_id: int, epoch: int,
                              partition: AddedPartition, add: bool) -> ErrorCode:
        """KIP-890's check (or, ``add``: TV2's implicit add) of a batch's partition.

        Asked of the coordinator wherever it runs (``FindKafkaTxn`` with the
        partition). Unknown outcome: the add may have been made; it is
        idempotent (a partition added again changes nothing), so it is asked
        again until an answer comes. None within ``FIND_TIMEOUT_S``:
        NOT_ENOUGH_REPLICAS (retriable, nothing written; the producer resends,
        and the partition maybe added meanwhile is harmless: its marker is
        written at the transaction's end as for any partition added).
        """
        async def local() -> ErrorCode:
            return await check_partition(self._producers, transactional_id, producer_id,
                                         epoch, partition, add)

        async def remote(owner: str) -> ErrorCode:
            return ErrorCode(await self._peers.check_kafka_txn_partition(
                owner, transactional_id, producer_id, epoch, partition, add))

        checked = await self._ask(transactional_id, local, remote)
        return ErrorCode.not_enough_replicas if checked is None else checked

    async def _ask(self, transactional_id: str, local: Callable[[], Awaitable[_T]],
                   remote: Callable[[str], Awaitable[_T]]) -> _T | None:
        """``local`` if the coordinator runs here, else ``remote`` at its owner; None: no answer.

        Asked again with backoff for ``FIND_TIMEOUT_S`` while the coordinator
        moves, loads or leaves a call unanswered (both are reads or idempotent).
        """
        deadline = time.monotonic() + FIND_TIMEOUT_S
        delay_s = _FIRST_DELAY_S
        while True:
            failure: BaseException
            try:
                if self.here():
                    return await local()
                owner = self._owners.owner_of(COORDINATOR_SEGMENT)
                if owner and owner != self._owners.address:
                    return await remote(owner)
                failure = self._wrong_host()  # unknown, or loading here
            except (WrongHostError, BrokerShuttingDownError) as error:
                failure = error
            if time.monotonic() + delay_s > deadline:
                log.info("kafka transactional batch of %r: no transaction coordinator within "
                         "%.0f s (%s)", transactional_id, FIND_TIMEOUT_S, failure)
                return None
            await asyncio.sleep(delay_s)
            delay_s = min(delay_s * 2, _MAX_DELAY_S)

    async def abort_unknown(self, txn_id: TxnId) -> bool:
        """Abort ``txn_id``: one of its batches forwarded to a heir has an unknown outcome.

        ``broker.kafka.forwarding``: the hop stayed unanswered to its deadline,
        so the heir may or may not hold the batch; a commit could then hold
        the batch or not, so the transaction is aborted (Folio's ``AbortTxn``
        at the transaction coordinator, wherever it runs) and the producer
        learns it at its next request (INVALID_TXN_STATE: it aborts). True
        once aborted (or found aborted). False if it was decided committed
        already (the producer committed without waiting for this batch's
        answer: logged) or no coordinator answered for ``ABORT_TIMEOUT_S``
        (an abort is idempotent: asked again until then; the transaction's
        timeout aborts it if the producer never commits).
        """
        deadline = time.monotonic() + ABORT_TIMEOUT_S
        delay_s = _FIRST_DELAY_S
        while True:
            failure: BaseException
            try:
                if self._coordinator_here():
                    await self._producers.coordinator.abort(txn_id)
                    return True
                owner = self._owners.owner_of(COORDINATOR_SEGMENT)
                if owner and owner != self._owners.address:
                    await self._peers.abort_txn(owner, txn_id)
                    return True
                failure = self._wrong_host()
            except TxnStateError as decided:
                if decided.actual in ("ABORTING", "ABORTED"):
                    return True
                log.error("kafka transaction %s was decided %s while one of its batches "
                          "forwarded to a heir had an unknown outcome", decided.txn_id,
                          decided.actual)
                return False
            except TxnNotFoundError as error:
                log.error("kafka transaction with a batch of unknown outcome: %s", error)
                return False
            except (BrokerError, LedgerError) as error:
                failure = error  # unknown, or not the coordinator: asked again
            if time.monotonic() + delay_s > deadline:
                log.warning("kafka transaction with a batch of unknown outcome not aborted "
                            "within %.0f s: %s", ABORT_TIMEOUT_S, failure)
                return False
            await asyncio.sleep(delay_s)
            delay_s = min(delay_s * 2, _MAX_DELAY_S)

    # -- a group coordinator's TxnOffsetCommit ----------------------------------------

    async def keep_offsets(self, transactional_id: str, producer_id: int, epoch: int,
                           group_id: str, items: list[OffsetCommitItem], begin: bool = False,
                           ) -> dict[TopicPartition, ErrorCode]:
        """Hand offsets the group accepted to the transaction coordinator, wherever it runs.

        ``begin`` (TxnOffsetCommit v5+, KIP-890): the transaction is begun
        first if none is open (``broker.kafka.txns.implicit``). A failed or
        unanswered call is COORDINATOR_NOT_AVAILABLE: the client sends the
        same offsets again, which are kept once (and begin nothing twice).
        """
        try:
            if self.here():
                return await keep_implicit(self._producers, transactional_id, producer_id,
                                           epoch, group_id, items, begin)
            owner = self._owners.owner_of(COORDINATOR_SEGMENT)
            if owner and owner != self._owners.address:
                answers = await self._peers.add_kafka_txn_offsets(
                    owner, transactional_id, producer_id, epoch, group_id,
                    [_offset(item) for item in items], begin)
                return {(item.topic, item.partition): ErrorCode(item.error_code)
                        for item in answers}
        except (BrokerError, LedgerError) as error:
            log.info("kafka TxnOffsetCommit of %r for group %s: not kept yet (%s)",
                     transactional_id, group_id, error)
        return {(item.topic, item.partition): ErrorCode.coordinator_not_available
                for item in items}

    # -- a group coordinator's OffsetFetch with require_stable -------------------------

    async def unstable_offsets(self, group_id: str) -> set[TopicPartition] | None:
        """The group's partitions whose offsets a transaction holds; None: not known.

        Asked of the transaction coordinator wherever it runs (a read, asked
        again with backoff for ``STABLE_TIMEOUT_S``); None when no answer came
        (the caller answers every partition UNSTABLE_OFFSET_COMMIT).
        """
        deadline = time.monotonic() + STABLE_TIMEOUT_S
        delay_s = _FIRST_DELAY_S
        while True:
            failure: BaseException
            try:
                if self.here():
                    return self._producers.pending_offsets(group_id)
                owner = self._owners.owner_of(COORDINATOR_SEGMENT)
                if owner and owner != self._owners.address:
                    return set(await self._peers.pending_kafka_txn_offsets(owner, group_id))
                failure = self._wrong_host()  # unknown, or loading here
            except (BrokerError, LedgerError) as error:
                failure = error
            if time.monotonic() + delay_s > deadline:
                log.info("kafka OffsetFetch (require_stable) of group %s: no transaction "
                         "coordinator within %.0f s (%s)", group_id, STABLE_TIMEOUT_S, failure)
                return None
            await asyncio.sleep(delay_s)
            delay_s = min(delay_s * 2, _MAX_DELAY_S)

    # -- the coordinator's committed offsets ------------------------------------------

    async def write_offsets(self, group_id: str, items: list[OffsetCommitItem],
                            ) -> dict[TopicPartition, ErrorCode]:
        """A committed transaction's offsets, written at the group's coordinator.

        Raises ``BrokerError`` when the call had no answer: maybe written; the
        caller keeps them and writes them again.
        """
        if self._group_here(group_id):
            errors = {(item.topic, item.partition): ErrorCode.none for item in items}
            return await self._groups.write_offsets(group_id, items, errors)
        segment = f"{OFFSETS_TOPIC}/{container_of(GROUP_KEY, group_id, self._count)}"
        owner = self._owners.owner_of(segment)
        if not owner or owner == self._owners.address:  # unknown, or loading here
            return {(item.topic, item.partition): ErrorCode.coordinator_not_available
                    for item in items}
        answers = await self._peers.commit_kafka_txn_offsets(
            owner, group_id, [_offset(item) for item in items])
        return {(item.topic, item.partition): ErrorCode(item.error_code) for item in answers}

    # -- KafkaTxnService: the internal calls -------------------------------------------

    async def find_txn(self, transactional_id: str, producer_id: int,
                       epoch: int) -> tuple[int, TxnId | None]:
        if not self.here():
            raise self._wrong_host()
        code, txn_id = self._producers.append_check(transactional_id, producer_id, epoch)
        return code.value, txn_id

    async def check_txn_partition(self, transactional_id: str, producer_id: int, epoch: int,
                                  topic: str, partition: int, add: bool) -> int:
        if not self.here():
            raise self._wrong_host()
        code = await check_partition(self._producers, transactional_id, producer_id, epoch,
                                     (topic, partition), add)
        return code.value

    async def add_offsets(self, transactional_id: str, producer_id: int, epoch: int,
                          group_id: str, offsets: Sequence[TxnOffset],
                          begin: bool = False) -> list[TxnOffset]:
        if not self.here():
            raise self._wrong_host()
        items = [OffsetCommitItem(item.topic, item.partition,
                                  CommittedOffset(item.offset, item.leader_epoch,
                                                  item.metadata))
                 for item in offsets]
        errors = await keep_implicit(self._producers, transactional_id, producer_id, epoch,
                                     group_id, items, begin)
        return [_answer(item, errors) for item in offsets]

    async def pending_offsets(self, group_id: str) -> list[tuple[str, int]]:
        if not self.here():
            raise self._wrong_host()
        return sorted(self._producers.pending_offsets(group_id))

    async def commit_offsets(self, group_id: str,
                             offsets: Sequence[TxnOffset]) -> list[TxnOffset]:
        if not self._group_here(group_id):
            return [_answer(item, {}, ErrorCode.not_coordinator) for item in offsets]
        items = [OffsetCommitItem(item.topic, item.partition,
                                  CommittedOffset(item.offset, item.leader_epoch,
                                                  item.metadata))
                 for item in offsets]
        errors = {(item.topic, item.partition): ErrorCode.none for item in items}
        errors = await self._groups.write_offsets(group_id, items, errors)
        return [_answer(item, errors) for item in offsets]


def _offset(item: OffsetCommitItem) -> TxnOffset:
    return TxnOffset(item.topic, item.partition, item.offset.offset,
                     item.offset.leader_epoch, item.offset.metadata)


def _answer(item: TxnOffset, errors: dict[TopicPartition, ErrorCode],
            default: ErrorCode = ErrorCode.unknown_server_error) -> TxnOffset:
    code = errors.get((item.topic, item.partition), default)
    return TxnOffset(item.topic, item.partition, item.offset, item.leader_epoch,
                     item.metadata, code.value)
