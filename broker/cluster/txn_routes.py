"""``ClusterTxnRoutes``: where a cluster broker's transaction registrations and markers go.

The coordinator runs on the owner of the container of ``_txnlog/0``; a
transaction's segments may be owned by any broker (``broker.txn.participant``
says what a segment's owner does). This module routes the two crossings:

- **Registration** (owner -> coordinator): in process when the coordinator
  runs here (no RPC), else ``RegisterTxnSegment`` on the broker that owns
  ``_txnlog/0``. A WrongHost (the coordinator moved, or its new broker is
  still replaying the log) or an unreachable coordinator is retried with
  backoff for ``REGISTER_TIMEOUT_S``; then the append is refused with
  ``BrokerShuttingDownError`` (UNAVAILABLE, retriable), never a WrongHost
  naming ``_txnlog/0`` (the writer's segment did not move).
- **Markers** (coordinator -> owner): written here when this broker owns the
  segment, else ``WriteTxnMarker`` on its owner (the owner cache's answer, or
  the owner a WrongHost names), retried with backoff until it lands. A
  segment deleted meanwhile (NOT_FOUND) needs no marker. The retries stop
  once this broker no longer owns the coordinator's container: the
  coordinator that takes over replays the log and writes the markers again
  (a second marker changes nothing), and the commit call here ends with a
  WrongHost naming the new coordinator.

Owners come from the watched owner cache (``broker.cluster.owner_cache``):
no metadata read per call.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Final

from broker.cluster.containers import COORDINATOR_SEGMENT
from broker.cluster.kafka_txns import KafkaTxnService
from broker.cluster.owners import SegmentOwners
from broker.cluster.peers import PeerClients
from broker.errors import (
    BrokerError,
    BrokerShuttingDownError,
    NoSuchSegmentError,
    TopicNotFoundError,
    WrongHostError,
)
from broker.segments.entry import EntryKind
from broker.txn.participant import MarkableSegment, TxnParticipant
from broker.txn.states import DEFAULT_FINISHED_RETENTION_MS
from ledger.errors import LedgerError
from txnbuffer.api import TxnId
from txnbuffer.txn_ids import txn_id_hex

__all__ = ["REGISTER_TIMEOUT_S", "ClusterTxnRoutes"]

log = logging.getLogger(__name__)

#: How long a transactional append waits for the coordinator to take its registration.
REGISTER_TIMEOUT_S: Final = 30.0
_FIRST_DELAY_S: Final = 0.05
_MAX_DELAY_S: Final = 1.0
#: Marker attempts that fail quietly before each failure is logged at WARNING.
_QUIET_ATTEMPTS: Final = 5

#: Logs a segment in an OPEN transaction (the local ``TxnCoordinator.register_segment``).
LocalRegister = Callable[[TxnId, str], Awaitable[None]]
#: A loaded segment of this broker's topic manager (loads it: check ownership first).
LoadSegment = Callable[[str], Awaitable[MarkableSegment]]


class ClusterTxnRoutes:
    """Registrations and markers of one cluster broker (see the module docstring).

    Args:
        owners: ownership as this broker knows it (owner cache).
        peers: clients of the other brokers.
        coordinator_here: whether the transaction coordinator runs here now.
        register_here: the local coordinator's ``register_segment``.
        load_segment: this broker's ``TopicManager.segment``.
        finished_retention_ms: how long the participant remembers a closed transaction.
        register_timeout_s: how long a registration is retried.
    """

    def __init__(self, owners: SegmentOwners, peers: PeerClients,
                 coordinator_here: Callable[[], bool], register_here: LocalRegister,
                 load_segment: LoadSegment, *,
                 finished_retention_ms: int = DEFAULT_FINISHED_RETENTION_MS,
                 register_timeout_s: float = REGISTER_TIMEOUT_S) -> None:
        self._owners = owners
        self._peers = peers
        self._coordinator_here = coordinator_here
        self._register_here = register_here
        self._load_segment = load_segment
        self._register_timeout_s = register_timeout_s
        #: The segment owner's side; the Append streams and WriteTxnMarker use it.
        self.participant = TxnParticipant(self.register, self._served_segment,
                                          finished_retention_ms=finished_retention_ms)
        self._stopped = False
        #: The Kafka transactions the internal calls reach (set by the Kafka
        #: listener when it starts: ``broker.kafka.txns.cluster``).
        self.kafka: KafkaTxnService | None = None

    def stop(self) -> None:
        """The broker is stopping: retries end (``BrokerShuttingDownError``).

        A commit cut short so is finished by the next coordinator from its log.
        """
        self._stopped = True

    def _check_running(self) -> None:
        if self._stopped:
            raise BrokerShuttingDownError(
                "the broker is stopping; the next transaction coordinator finishes what is "
                "decided")

    async def register(self, txn_id: TxnId, segment: str) -> None:
        """Log ``segment`` in ``txn_id`` at the coordinator, wherever it runs.

        Raises:
            TxnNotFoundError, TxnStateError, InternalTopicError: the coordinator's refusal.
            BrokerShuttingDownError: no coordinator answered within ``register_timeout_s``.
        """
        deadline = time.monotonic() + self._register_timeout_s
        delay_s = _FIRST_DELAY_S
        while True:
            self._check_running()
            try:
                if self._coordinator_here():
                    await self._register_here(txn_id, segment)
                    return
                owner = self._owners.owner_of(COORDINATOR_SEGMENT)
                if owner:
                    await self._peers.register_txn_segment(owner, txn_id, segment)
                    return
                failure: BrokerError = WrongHostError(COORDINATOR_SEGMENT, "")
            except (WrongHostError, BrokerShuttingDownError) as error:
                failure = error
            if time.monotonic() + delay_s > deadline:
                raise BrokerShuttingDownError(
                    f"the transaction coordinator (the owner of {COORDINATOR_SEGMENT}) did not "
                    f"take segment {segment!r} of transaction {txn_id_hex(txn_id)} within "
                    f"{self._register_timeout_s:g} s: {failure}")
            await asyncio.sleep(delay_s)
            delay_s = min(delay_s * 2, _MAX_DELAY_S)

    async def write_marker(self, segment: str, txn_id: TxnId, kind: EntryKind) -> None:
        """The coordinator's marker for ``segment``, written by its owner; once durable.

        Retried until it lands (module docstring).

        Raises:
            WrongHostError: the coordinator's container left this broker meanwhile
                (naming ``_txnlog/0`` and its new owner): the successor finishes.
        """
        delay_s = _FIRST_DELAY_S
        hint = ""
        attempt = 0
        while True:
            self._check_running()
            if not self._owners.owns(COORDINATOR_SEGMENT):
                raise WrongHostError(COORDINATOR_SEGMENT,
                                     self._owners.owner_of(COORDINATOR_SEGMENT))
            attempt += 1
            tried = ""
            try:
                if self._owners.owns(segment):
                    await self.participant.write_marker(segment, txn_id, kind)
                    return
                tried = hint or self._owners.owner_of(segment)
                hint = ""
                if tried:
                    await self._peers.write_txn_marker(
                        tried, segment, txn_id, kind is EntryKind.COMMIT_MARKER)
                    return
                failure: BaseException = WrongHostError(segment, "")
            except (NoSuchSegmentError, TopicNotFoundError):
                log.info("no %s marker of transaction %s for %s: the segment is gone",
                         kind.name, txn_id_hex(txn_id), segment)
                return
            except WrongHostError as error:
                failure = error
                hint = error.owner if error.owner != tried else ""
            except (BrokerError, LedgerError) as error:
                failure = error
            level = logging.WARNING if attempt > _QUIET_ATTEMPTS else logging.DEBUG
            log.log(level, "%s marker of transaction %s for %s not written yet (attempt %d, "
                    "again in %.2f s): %s", kind.name, txn_id_hex(txn_id), segment, attempt,
                    delay_s, failure)
            await asyncio.sleep(delay_s)
            delay_s = min(delay_s * 2, _MAX_DELAY_S)

    async def _served_segment(self, name: str) -> MarkableSegment:
        """``name`` loaded here, only while this broker owns it (never fence its owner)."""
        if not self._owners.owns(name):
            raise WrongHostError(name, self._owners.owner_of(name))
        segment = await self._load_segment(name)
        if not self._owners.owns(name):  # lost while it loaded
            raise WrongHostError(name, self._owners.owner_of(name))
        return segment
