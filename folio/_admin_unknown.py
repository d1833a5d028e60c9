"""The admin calls that change state, made so that an unknown outcome is reconciled.

``folio.admin.AdminCore`` hands its topic and transaction writes here; each
is a coroutine made through ``folio._unknown.settle_async`` (on the loop of
either client face): after an unknown outcome (a lost
answer, ``DEADLINE_EXCEEDED``, the client's own wait) the call is made again
until a deadline, and the refusal a repeat of an applied call gets is read
back as that call's success:

- ``CreateTopic``: ``TopicExistsError`` after an unknown outcome is our
  create when the topic has the segment count asked for (else another
  client's topic: the error is raised).
- ``DeleteTopic``: ``TopicNotFoundError`` after an unknown outcome: deleted.
- ``UpdateTopicConfig``, ``SealTopic``, ``TruncateSegment`` (to an offset: a
  repeat truncates nothing more), ``GrantPermission`` (merges),
  ``RevokePermission`` (a no-op when absent): idempotent, made again.
- ``ScaleTopic``: ``SegmentSealedError`` after an unknown outcome is our
  scale when the first sealed segment's successors are exactly the ranges
  asked for; the result is then read back (``get_segments`` with sealed ones).
- ``CommitTxn``: a refusal saying a transaction is COMMITTING or COMMITTED
  after an unknown outcome is our commit; with a ``commit_key``, a duplicate
  answer after an unknown outcome is ours when the transactions are
  committed (``GetTxnStatus``), else another committer's.
- ``AbortTxns``: idempotent (a repeat aborts what is still open; the ids a
  lost attempt aborted are then not in the answer), made again.
- ``AbortTxn``: a refusal saying ABORTING, ABORTED or TIMED_OUT after an
  unknown outcome is our abort.

Crash windows: a call applied with its answer lost and the broker then gone
until the deadline raises ``OutcomeUnknownError``; the state is whatever the
broker applied, read it back later.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Final, TypeVar

from folio._unknown import settle_async
from folio.api.v1 import admin_pb2, transactions_pb2
from folio.errors import SegmentSealedError, TopicExistsError, TopicNotFoundError, TxnStateError
from folio.models import (
    ScaleResult,
    SegmentRange,
    TopicInfo,
    scale_result_from_proto,
    topic_info_from_proto,
)

if TYPE_CHECKING:
    from folio.admin import AdminCore

__all__ = ["abort_txn", "abort_txns", "again", "commit_txns", "create_topic", "delete_topic",
           "scale_topic", "seal_topic", "update_topic_config"]

R = TypeVar("R")

_COMMITTED: Final = ("COMMITTING", "COMMITTED")
_ABORTED: Final = ("ABORTING", "ABORTED", "TIMED_OUT")
#: A boundary within this of the asked one is the asked one (as the broker takes it).
_EPSILON: Final = 1e-9


async def create_topic(admin: AdminCore, request: admin_pb2.CreateTopicRequest) -> TopicInfo:
    """``CreateTopic``; ``TopicExistsError`` if the name was taken by another."""
    async def attempt(after_unknown: bool) -> TopicInfo:
        try:
            return topic_info_from_proto(await admin._call(admin._connection.admin.CreateTopic,
                                                           request))
        except TopicExistsError:
            if not after_unknown:
                raise
            existing = await admin.get_topic(request.name)
            if len(existing.segments) != request.segment_count:
                raise
            return existing
    return await settle_async(f"CreateTopic {request.name}", attempt)


async def delete_topic(admin: AdminCore, name: str) -> None:
    """``DeleteTopic``; ``TopicNotFoundError`` unless an earlier attempt deleted it."""
    async def attempt(after_unknown: bool) -> None:
        try:
            await admin._call(admin._connection.admin.DeleteTopic,
                              admin_pb2.DeleteTopicRequest(name=name))
        except TopicNotFoundError:
            if not after_unknown:
                raise
    await settle_async(f"DeleteTopic {name}", attempt)


async def update_topic_config(admin: AdminCore,
                              request: admin_pb2.UpdateTopicConfigRequest) -> TopicInfo:
    """``UpdateTopicConfig``: sets the given values, so made again as it is."""
    async def attempt(_after: bool) -> TopicInfo:
        return topic_info_from_proto(
            await admin._call(admin._connection.admin.UpdateTopicConfig, request))
    return await settle_async(f"UpdateTopicConfig {request.name}", attempt)


async def again(operation: str, call: Callable[[], Awaitable[R]]) -> R:
    """An idempotent admin call (``call`` makes it on the admin connection of the
    moment), made again after an unknown outcome."""
    async def attempt(_after: bool) -> R:
        return await call()
    return await settle_async(operation, attempt)


async def seal_topic(admin: AdminCore, name: str) -> TopicInfo:
    """``SealTopic``: idempotent, made again as it is."""
    request = admin_pb2.SealTopicRequest(name=name)

    async def attempt(_after: bool) -> TopicInfo:
        return topic_info_from_proto(await admin._call(admin._connection.admin.SealTopic,
                                                       request))
    return await settle_async(f"SealTopic {name}", attempt)


async def scale_topic(admin: AdminCore, request: admin_pb2.ScaleTopicRequest) -> ScaleResult:
    """``ScaleTopic``; after an unknown outcome a sealed segment is read back."""
    async def attempt(after_unknown: bool) -> ScaleResult:
        try:
            return scale_result_from_proto(await admin._call(admin._connection.admin.ScaleTopic,
                                                             request))
        except SegmentSealedError:
            if not after_unknown or not request.seal:
                raise
            done = await _scaled(admin, request)
            if done is None:
                raise
            return done
    return await settle_async(f"ScaleTopic {request.topic}", attempt)


async def _scaled(admin: AdminCore,
                  request: admin_pb2.ScaleTopicRequest) -> ScaleResult | None:
    """The scale ``request`` asked for as the topic shows it, or None if it shows another."""
    every = await admin.get_segments(request.topic, include_sealed=True)
    sealed = sorted((s for s in every if s.name in request.seal), key=_low)
    created = sorted((s for s in every if set(s.predecessors) == set(request.seal)), key=_low)
    asked = sorted((r.low, r.high) for r in request.new_ranges)
    if len(sealed) != len(set(request.seal)) or not all(s.sealed for s in sealed) or \
            len(created) != len(asked) or not all(
                abs(s.key_low - low) <= _EPSILON and abs(s.key_high - high) <= _EPSILON
                for s, (low, high) in zip(created, asked, strict=True)):
        return None
    return ScaleResult(sealed=tuple(sealed), created=tuple(created))


def _low(segment: SegmentRange) -> float:
    return segment.key_low


async def commit_txns(admin: AdminCore, request: transactions_pb2.CommitTxnRequest) -> bool:
    """``CommitTxn``: True when committed by this call (or a lost attempt of it)."""
    async def attempt(after_unknown: bool) -> bool:
        try:
            duplicate = (await admin._call(admin._connection.transactions.CommitTxn,
                                           request)).duplicate
        except TxnStateError as error:
            if after_unknown and error.actual in _COMMITTED:
                return True  # an earlier attempt, whose answer was lost, committed
            raise
        if duplicate and after_unknown:
            # The key's sequence is committed: by our lost attempt if these
            # transactions are committed, else by another committer (and the
            # broker aborted ours).
            return all([(await admin.transaction_status(txn_id)).committed
                        for txn_id in request.txn_ids])
        return not duplicate
    return await settle_async(f"CommitTxn {_ids(request.txn_ids)}", attempt)


async def abort_txn(admin: AdminCore, txn_id: bytes) -> None:
    """``AbortTxn``; a refusal saying it is aborted after an unknown outcome is success."""
    async def attempt(after_unknown: bool) -> None:
        try:
            await admin._call(admin._connection.transactions.AbortTxn,
                              transactions_pb2.AbortTxnRequest(txn_id=txn_id))
        except TxnStateError as error:
            if not (after_unknown and error.actual in _ABORTED):
                raise
    await settle_async(f"AbortTxn {txn_id.hex()}", attempt)


async def abort_txns(admin: AdminCore,
                     request: transactions_pb2.AbortTxnsRequest) -> list[bytes]:
    """``AbortTxns``: made again as it is (also on UNAVAILABLE within one attempt)."""
    async def attempt(_after: bool) -> list[bytes]:
        return list((await admin._call(admin._connection.transactions.AbortTxns, request,
                                       retry=True)).aborted)
    return await settle_async(f"AbortTxns {request.label}", attempt)


def _ids(txn_ids: Sequence[bytes]) -> str:
    return ",".join(txn_id.hex() for txn_id in txn_ids)
