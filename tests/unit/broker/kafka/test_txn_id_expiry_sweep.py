"""``TxnIdExpiry`` on a real ledger stack with a clock of its own.

An idle id is tombstoned (a fresh ``TxnProducers`` on the same topics does not
load it) and its next InitProducerId gets a new producer id at epoch 0; an id
with an open transaction stays; a call of the forgotten producer that was under
way when it expired writes nothing back (its record is not resurrected) and is
answered NOT_COORDINATOR, then INVALID_PRODUCER_ID_MAPPING.
"""

from __future__ import annotations

import asyncio

from kio.schema.errors import ErrorCode

from broker.kafka.producer_ids import ProducerIds
from broker.kafka.txns.expiry import TxnIdExpiry, TxnIdExpirySettings
from broker.kafka.txns.producers import TxnProducers
from tests.unit.broker.conftest import BrokerEnv
from tests.unit.broker.kafka.test_txn_producers_moves import _producers

EXPIRATION_MS = 1_000


class Clock:
    def __init__(self) -> None:
        self.now_ms = 0

    def __call__(self) -> int:
        return self.now_ms


async def test_idle_ids_expire_open_transactions_stay(env: BrokerEnv) -> None:
    coordinator, groups, producers = await _producers(env)
    clock = Clock()
    expiry = TxnIdExpiry(producers, TxnIdExpirySettings(EXPIRATION_MS, 100), clock)
    try:
        _, idle_id, idle_epoch = await producers.init("idle", 60_000, -1, -1)
        _, busy_id, busy_epoch = await producers.init("busy", 60_000, -1, -1)
        assert await producers.begin("busy", busy_id, busy_epoch) == ErrorCode.none
        idle = producers.producer("idle")
        assert idle is not None
        clock.now_ms = idle.last_update_ms + EXPIRATION_MS - 1
        assert await expiry.sweep() == 0
        clock.now_ms += 1 + 10 * EXPIRATION_MS
        sweep = asyncio.ensure_future(expiry.sweep())
        await asyncio.sleep(0)  # its tombstone is being written, under the id's lock
        # A call of the producer that found its state before it went: it waits for
        # the lock, then writes nothing back and sends the client to look again.
        late = asyncio.ensure_future(producers.begin("idle", idle_id, idle_epoch))
        assert await sweep == 1  # "busy" has its transaction open
        assert await late == ErrorCode.not_coordinator
        assert idle.expired
        assert producers.producer("idle") is None
        assert producers.producer("busy") is not None
        # Asked again: the id is unknown.
        assert await producers.begin("idle", idle_id, idle_epoch) == (
            ErrorCode.invalid_producer_id_mapping)
        # The tombstone holds for the next coordinator (or a restart), whose
        # InitProducerId of the id starts afresh: a new producer id at epoch 0.
        again = TxnProducers(env.manager(), coordinator, ProducerIds(env.store), groups)
        await again.start()
        assert again.producer("idle") is None and again.producer("busy") is not None
        code, new_id, new_epoch = await again.init("idle", 60_000, -1, -1)
        assert (code, new_epoch) == (ErrorCode.none, 0) and new_id != idle_id
    finally:
        await coordinator.close()
