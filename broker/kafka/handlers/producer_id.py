"""InitProducerId (key 22), v0-v5: producer ids for idempotent producers.

Without a transactional id, a new producer gets a fresh id (never given
before: ``broker.kafka.producer_ids``) and epoch 0. A producer that passes
its id and epoch (v3+, KIP-360, after a fatal sequence error) gets the same
id with the epoch bumped; its Folio writer id (``kafka:<id>:<epoch>``) is then
new, so its sequences start again at 0. An epoch past 32767 gets a new id.

With a transactional id the call belongs to Kafka transactions:
``KafkaContext.transactional_producer_id`` answers it (the transaction
handlers set it); without it, TRANSACTIONAL_ID_AUTHORIZATION_FAILED. v5
only adds an error code (TRANSACTION_ABORTABLE, KIP-890) Folio never answers.
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from broker.kafka.access import IDEMPOTENT, TXN_PRODUCE, allowed, may_produce_somewhere
from broker.kafka.context import KafkaContext
from broker.kafka.dispatch import Api, Call
from broker.kafka.error_codes import error_code
from broker.kafka.messages import build, response_class
from ledger.errors import LedgerError

__all__ = ["INIT_PRODUCER_ID_KEY", "ROWS"]

INIT_PRODUCER_ID_KEY = 22
_MAX_EPOCH = 32767
_ZERO = datetime.timedelta(0)


async def handle_init_producer_id(context: KafkaContext, call: Call) -> Any:
    """A producer id and epoch (see the module doc)."""
    cls = response_class(INIT_PRODUCER_ID_KEY, call.version)
    request = call.request
    if request.transactional_id is not None:
        if not allowed(context, call, TXN_PRODUCE, request.transactional_id):
            return build(cls, throttle_time=_ZERO, error_code=TXN_PRODUCE.refused,
                         producer_id=-1, producer_epoch=-1)
        if context.transactional_producer_id is None:
            return build(cls, throttle_time=_ZERO,
                         error_code=ErrorCode.transactional_id_authorization_failed,
                         producer_id=-1, producer_epoch=-1)
        code, producer_id, epoch = await context.transactional_producer_id(context, call)
        return build(cls, throttle_time=_ZERO, error_code=code, producer_id=producer_id,
                     producer_epoch=epoch)
    if not may_produce_somewhere(context, call):  # Kafka's IdempotentWrite
        return build(cls, throttle_time=_ZERO, error_code=IDEMPOTENT.refused, producer_id=-1,
                     producer_epoch=-1)
    producer_id = getattr(request, "producer_id", -1)
    epoch = getattr(request, "producer_epoch", -1)
    try:
        if producer_id >= 0 and 0 <= epoch < _MAX_EPOCH:
            epoch += 1
        else:
            producer_id, epoch = await context.producer_ids.next_id(), 0
    except LedgerError as error:
        return build(cls, throttle_time=_ZERO, error_code=error_code(error), producer_id=-1,
                     producer_epoch=-1)
    return build(cls, throttle_time=_ZERO, error_code=ErrorCode.none, producer_id=producer_id,
                 producer_epoch=epoch)


ROWS = (Api(INIT_PRODUCER_ID_KEY, "InitProducerId", 0, 5, handle_init_producer_id),)
