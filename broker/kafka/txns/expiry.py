"""Transactional ids that expire (Kafka's ``transactional.id.expiration.ms``).

Every ``cleanup_interval_ms`` (Kafka's
``transaction.remove.expired.transaction.cleanup.interval.ms``) the ids whose
last transaction ended longer than ``expiration_ms`` ago (``phases.expired``:
an ongoing transaction never expires; a timed-out one is aborted by Folio's
coordinator first and counts from its deadline) are forgotten: a tombstone in
``_kafka_txn_state``, then gone from memory, so ListTransactions and
DescribeTransactions no longer show them and the next InitProducerId of the
id starts afresh with a new producer id at epoch 0, as in Kafka.

Only while the records are loaded and served here (a cluster: while the
Kafka transaction coordinator runs on this broker; ``TxnProducers.loaded``).
Outcomes: a tombstone that fails or whose outcome is unknown keeps the id in
memory and the next sweep writes it again (harmless twice); a crash after the
tombstone and before memory changes loses nothing (the record is gone).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from broker.errors import BrokerError, TxnNotFoundError
from broker.kafka.txns.phases import expired
from broker.kafka.txns.producers import TxnProducers
from broker.kafka.txns.records import TxnProducer
from broker.txn.coordinator import TxnStatus
from ledger.errors import LedgerError
from txnbuffer.api import TxnId

__all__ = ["TxnIdExpiry", "TxnIdExpirySettings"]

log = logging.getLogger(__name__)

#: Transactional ids looked at between two yields to the event loop.
_IDS_PER_SLICE = 1024


@dataclass(frozen=True, slots=True)
class TxnIdExpirySettings:
    """``transactional.id.expiration.ms`` and how often it is applied (Kafka's defaults)."""

    expiration_ms: int = 604_800_000
    cleanup_interval_ms: int = 3_600_000

    def __post_init__(self) -> None:
        if self.expiration_ms <= 0 or self.cleanup_interval_ms <= 0:
            raise ValueError("expiration_ms and cleanup_interval_ms must be positive")


class TxnIdExpiry:
    """Forgets the expired transactional ids of ``producers`` (module docstring)."""

    def __init__(self, producers: TxnProducers, settings: TxnIdExpirySettings,
                 clock_ms: Callable[[], int] | None = None) -> None:
        self.settings = settings
        self._producers = producers
        self._clock_ms = clock_ms or (lambda: int(time.time() * 1000))

    async def run(self) -> None:
        """Sweep every cleanup interval, until cancelled."""
        while True:
            await asyncio.sleep(self.settings.cleanup_interval_ms / 1000)
            try:
                await self.sweep()
            except Exception:  # a bug: logged, and the next sweep runs all the same
                log.exception("kafka transactions: transactional id expiry sweep failed")

    async def sweep(self) -> int:
        """Forget every expired id (none unless the records are served here); how many."""
        if not self._producers.loaded:
            return 0
        now_ms = self._clock_ms()
        gone = 0
        for looked, producer in enumerate(self._producers.described(), 1):
            if looked % _IDS_PER_SLICE == 0:
                await asyncio.sleep(0)  # let the loop serve between slices of ids
            if not self._expired(producer, now_ms):
                continue
            try:
                if await self._producers.expire(producer.transactional_id,
                                                lambda p: self._expired(p, now_ms)):
                    gone += 1
                    log.info("kafka transactions: %s expired (producer %d; no transaction "
                             "for %d ms)", producer.transactional_id, producer.producer_id,
                             self.settings.expiration_ms)
            except (BrokerError, LedgerError) as error:
                log.warning("kafka transactions: expiring %s failed (%s); tried again at "
                            "the next sweep", producer.transactional_id, error)
        return gone

    def _expired(self, producer: TxnProducer, now_ms: int) -> bool:
        return expired(producer, self._status, now_ms, self.settings.expiration_ms)

    def _status(self, txn_id: TxnId) -> TxnStatus | None:
        try:
            return self._producers.coordinator.status(txn_id)
        except TxnNotFoundError:
            return None
