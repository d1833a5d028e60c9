"""The admin calls of a client: topics, segments, transactions by id, permissions.

``AdminCore`` is the part of both client faces that is plain unary gRPC: each
public method is a coroutine, run on the loop that owns the client's
channels. ``folio.aio.AsyncClient`` awaits them on the caller's loop;
``folio.Client`` runs the same coroutines on its IO thread (its methods are
made by ``folio._face.blocking``, with these signatures and docstrings). The
calls go through the client's brokers (``folio._transport.brokers``:
bootstrap, failover to another broker, WrongHost followed), retried on
UNAVAILABLE when the call only reads. Owners of the segments in answers are
recorded for routing.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence
from typing import Final, TypeVar

from google.protobuf.message import Message
from grpc import aio

from folio import _admin_unknown as settled
from folio._transport.brokers import Brokers
from folio._transport.io_thread import Connection
from folio.acl import Kind, PermissionGrant, grant_from_proto, grant_to_proto
from folio.api.v1 import admin_pb2, transactions_pb2
from folio.errors import InvalidArgumentError, TopicExistsError
from folio.models import (
    TOPIC_CONFIG_FIELDS,
    ClusterInfo,
    ScaleResult,
    SegmentInfo,
    SegmentRange,
    TopicInfo,
    cluster_info_from_proto,
    segment_info_from_proto,
    segment_range_from_proto,
    topic_info_from_proto,
)
from folio.txn.txn_status import TxnStatus

__all__ = ["AdminCore"]

log = logging.getLogger(__name__)

Req = TypeVar("Req", bound=Message)
Resp = TypeVar("Resp", bound=Message)

#: Extra seconds a call is waited for beyond its own deadline (then its outcome is unknown).
_WAIT_MARGIN_S: Final = 5.0


class AdminCore:
    """Topic, segment, permission and transaction admin calls, as coroutines.

    Made and awaited on the loop of its ``Brokers``. Every method raises the
    typed ``FolioError`` the broker answered, ``FolioUnavailableError`` when
    the broker cannot be reached, and ``TimeoutError`` after ``timeout_s``.
    The calls that change state (create, delete, scale, seal a topic, update
    its config, truncate, grant, revoke, commit or abort transactions) never
    raise at once on an unknown outcome: they read back and reconcile
    (``folio._admin_unknown``) for up to 60 s, then raise ``OutcomeUnknownError``.
    """

    def __init__(self, brokers: Brokers, timeout_s: float) -> None:
        """Args:
        brokers: the client's brokers (pools, owners, the admin broker).
        timeout_s: deadline of each call, in seconds.
        """
        self.timeout_s = timeout_s
        self._brokers = brokers

    @property
    def _connection(self) -> Connection:
        """The channel of admin calls now (the admin broker's; it changes on failover)."""
        return self._brokers.admin

    def _learn(self, segments: Iterable[SegmentRange]) -> list[SegmentRange]:
        """Records the owners the answer named; returns ``segments``."""
        listed = list(segments)
        owners = [(segment.name, segment.owner) for segment in listed if segment.owner]
        if owners:
            self._brokers.learn(owners)
        return listed

    async def create_topic(self, name: str, segments: int = 1, *, retention_ms: int | None = None,
                     retention_bytes: int | None = None, max_event_bytes: int | None = None,
                     ledger_rollover_bytes: int | None = None,
                     ledger_rollover_ms: int | None = None,
                     scale_target_events_per_s: int | None = None,
                     scale_min_segments: int | None = None,
                     scale_cooldown_ms: int | None = None,
                     exist_ok: bool = False) -> TopicInfo:
        """Creates a topic whose ``segments`` segments split the key space evenly.

        With ``exist_ok`` an existing topic of that name is returned as it is,
        like ``kafka-topics --create --if-not-exists``: its segment count and
        config are neither compared nor changed (a scaled topic's active
        segment count differs from the one it was created with anyway), so
        compare the returned ``TopicInfo`` if that matters, and use
        ``update_topic_config`` to change its config.

        Args:
            name: the topic's name, Kafka's rule: 1 to 249 of
                ``[A-Za-z0-9._-]``, not ``.`` or ``..``; not a system topic's
                (``__folio_...`` and five ``_`` names, docs/kafka.md).
            segments: how many segments, 1 to 1024.
            retention_ms: keep events this long; -1 forever. None: broker default.
            retention_bytes: keep at most this many bytes per segment; -1: no limit.
            max_event_bytes: the largest payload accepted (at most 4 MiB).
            ledger_rollover_bytes: roll to a new ledger past this size.
            ledger_rollover_ms: roll to a new ledger past this age.
            scale_target_events_per_s: turn auto-scaling on: split a segment
                above this event rate, merge neighbours well below it.
                0 (the default): off.
            scale_min_segments: auto-scaling keeps at least this many open segments.
            scale_cooldown_ms: auto-scaling changes the topic at most once per this long.
            exist_ok: return the existing topic instead of raising
                ``TopicExistsError`` when the name is taken.

        Returns:
            The new topic (with ``exist_ok``, possibly the existing one).

        Raises:
            TopicExistsError: the name is taken (and not ``exist_ok``).
            TopicNameError: the name breaks the rules.
            InternalTopicError: a system topic (a ``_`` name): only the broker writes it.
            InvalidArgumentError: a bad segment count or config value.
        """
        config = _config(retention_ms=retention_ms, retention_bytes=retention_bytes,
                         max_event_bytes=max_event_bytes,
                         ledger_rollover_bytes=ledger_rollover_bytes,
                         ledger_rollover_ms=ledger_rollover_ms,
                         scale_target_events_per_s=scale_target_events_per_s,
                         scale_min_segments=scale_min_segments,
                         scale_cooldown_ms=scale_cooldown_ms)
        request = admin_pb2.CreateTopicRequest(name=name, segment_count=segments, config=config)
        try:
            return await settled.create_topic(self, request)
        except TopicExistsError:
            if not exist_ok:
                raise
        # Deleted between the two calls: TopicNotFoundError, as any get_topic.
        return await self.get_topic(name)

    async def get_topic(self, name: str) -> TopicInfo:
        """The topic, its configuration and its active segments.

        Raises:
            TopicNotFoundError: no such topic.
        """
        request = admin_pb2.GetTopicRequest(name=name)
        info = topic_info_from_proto(await self._call(self._connection.admin.GetTopic, request,
                                                retry=True))
        self._learn(info.segments)
        return info

    async def list_topics(self, *, include_internal: bool = False) -> list[TopicInfo]:
        """Every topic, by name.

        Args:
            include_internal: also list the broker's system topics
                (``__folio_...``, ``_txnlog`` and four more), which can be read for
                diagnosis but not written (``InternalTopicError``).
        """
        request = admin_pb2.ListTopicsRequest(include_internal=include_internal)
        response = await self._call(self._connection.admin.ListTopics, request, retry=True)
        return [topic_info_from_proto(topic) for topic in response.topics]

    async def describe_cluster(self) -> ClusterInfo:
        """Who serves what: the live brokers with the segment containers each serves.

        A standalone answers itself alone, with no containers (it serves every
        segment). Each segment's owner is also on ``SegmentRange.owner``
        (``get_topic``, ``get_segments``).
        """
        response = await self._call(self._connection.admin.ListBrokers,
                              admin_pb2.ListBrokersRequest(), retry=True)
        return cluster_info_from_proto(response)

    async def delete_topic(self, name: str) -> None:
        """Deletes the topic with all its events.

        Raises:
            TopicNotFoundError: no such topic.
            InternalTopicError: a system topic (a ``_`` name): only the broker writes it.
        """
        await settled.delete_topic(self, name)

    async def update_topic_config(self, /, name: str, **changes: int) -> TopicInfo:
        """Changes some of a topic's configuration values; the others keep theirs.

        Args:
            name: the topic.
            **changes: ``TopicConfig`` field names to new values, e.g.
                ``retention_ms=3_600_000``.

        Returns:
            The topic with its new configuration.

        Raises:
            InvalidArgumentError: an unknown field name or a bad value.
            TopicNotFoundError: no such topic.
            InternalTopicError: a system topic (a ``_`` name): only the broker writes it.
        """
        unknown = sorted(set(changes) - set(TOPIC_CONFIG_FIELDS))
        if unknown:
            raise InvalidArgumentError(
                f"unknown topic config field(s) {', '.join(unknown)}; "
                f"known: {', '.join(TOPIC_CONFIG_FIELDS)}")
        request = admin_pb2.UpdateTopicConfigRequest(name=name, config=_config(**changes))
        return await settled.update_topic_config(self, request)

    async def get_segments(self, topic: str, *, include_sealed: bool = False) -> list[SegmentRange]:
        """The topic's active segments, ordered by ``key_low``.

        Args:
            topic: the topic.
            include_sealed: list every segment the topic ever had instead,
                sealed ones included, ordered by number (creation order:
                predecessors before successors), each with its
                predecessors and successors.

        Raises:
            TopicNotFoundError: no such topic.
        """
        request = admin_pb2.GetSegmentsRequest(topic=topic, include_sealed=include_sealed)
        response = await self._call(self._connection.admin.GetSegments, request, retry=True)
        return self._learn(segment_range_from_proto(segment) for segment in response.segments)

    async def scale_topic(self, topic: str, seal: Sequence[str],
                    new_ranges: Sequence[tuple[float, float]]) -> ScaleResult:
        """Seals segments and creates successors whose ranges exactly cover theirs.

        A split seals one segment and gives several ranges, a merge seals
        neighbours and gives one range; both at once work too. The change is
        atomic. Writers move to the successors by themselves.

        Args:
            topic: the topic.
            seal: the names of the open segments to seal.
            new_ranges: ``(low, high)`` key ranges, together exactly the
                sealed segments' ranges (a boundary within 1e-9 of a sealed
                segment's is taken as it).

        Returns:
            The sealed segments (final offsets) and the new ones, each by ``key_low``.

        Raises:
            InvalidArgumentError: the ranges do not exactly cover the sealed
                segments', or a segment is named twice or belongs to another
                topic; the message says which.
            SegmentSealedError: a segment is sealed already.
            NoSuchSegmentError: no such segment.
            TopicNotFoundError: no such topic.
            InternalTopicError: a system topic (a ``_`` name): only the broker writes it.
        """
        request = admin_pb2.ScaleTopicRequest(
            topic=topic, seal=list(seal),
            new_ranges=[admin_pb2.KeyRange(low=low, high=high) for low, high in new_ranges])
        result = await settled.scale_topic(self, request)
        self._learn(result.created)
        return result

    async def get_successors(self, segment: str) -> list[SegmentRange]:
        """The segments created when ``segment`` was sealed by scaling, by ``key_low``.

        Each one lists its own predecessors. Empty while ``segment`` is open
        and when ``seal_topic`` sealed it.

        Raises:
            NoSuchSegmentError: no such segment.
        """
        request = admin_pb2.GetSuccessorsRequest(segment=segment)
        response = await self._call(self._connection.admin.GetSuccessors, request, retry=True)
        return self._learn(segment_range_from_proto(s) for s in response.successors)

    async def successors(self, segment: str) -> list[SegmentRange]:
        """``get_successors`` for the parts that follow a sealed segment (writers, readers)."""
        response = await self.unary(self._connection.admin.GetSuccessors,
                                    admin_pb2.GetSuccessorsRequest(segment=segment), retry=True)
        return self._learn(segment_range_from_proto(s) for s in response.successors)

    async def seal_topic(self, name: str) -> TopicInfo:
        """Seals every open segment of the topic: it takes no more events, stays readable.

        Writers of it fail with ``SegmentSealedError``. Idempotent.

        Raises:
            TopicNotFoundError: no such topic.
            InternalTopicError: a system topic (a ``_`` name): only the broker writes it.
        """
        return await settled.seal_topic(self, name)

    async def get_segment_info(self, segment: str) -> SegmentInfo:
        """One segment's offsets, state and ledgers.

        Raises:
            NoSuchSegmentError: no such segment (``TopicNotFoundError`` if
                its topic is unknown).
        """
        request = admin_pb2.GetSegmentInfoRequest(segment=segment)
        return segment_info_from_proto(await self._call(self._connection.admin.GetSegmentInfo,
                                                  request, retry=True))

    async def truncate_segment(self, segment: str, offset: int) -> SegmentInfo:
        """Deletes the segment's events before ``offset`` (whole ledgers only).

        The new ``start_offset`` is the first offset of the oldest ledger
        kept, which is <= ``offset``.

        Raises:
            OffsetOutOfRangeError: ``offset`` is beyond the segment's end.
            NoSuchSegmentError: no such segment.
            InternalTopicError: a system topic (a ``_`` name): only the broker writes it.
        """
        request = admin_pb2.TruncateSegmentRequest(segment=segment, offset=offset)

        async def truncate() -> SegmentInfo:
            return segment_info_from_proto(
                await self._call(self._connection.admin.TruncateSegment, request))
        return await settled.again(f"TruncateSegment {segment}", truncate)

    async def grant_permission(self, role: str, resource: str, actions: Sequence[str], *,
                         kind: Kind = "topic") -> PermissionGrant:
        """Grants ``role`` ``actions`` (produce, consume, admin) on a topic or reader group.

        ``resource`` is a name, a prefix ``orders.*``, or ``*``; ``kind``
        ``"topic"`` or ``"group"``. Adds to what the role had on it; returns
        the merged grant. Needs admin on what ``resource`` covers, or a super-user.

        Raises:
            InvalidArgumentError: a bad role, resource or action.
            PermissionDeniedError: the caller may not grant on it.
        """
        request = admin_pb2.GrantPermissionRequest(
            grant=grant_to_proto(role, kind, resource, actions))

        async def grant() -> PermissionGrant:
            return grant_from_proto(
                await self._call(self._connection.admin.GrantPermission, request))
        return await settled.again(f"GrantPermission {role}", grant)

    async def revoke_permission(self, role: str, resource: str, actions: Sequence[str], *,
                          kind: Kind = "topic") -> None:
        """Takes ``actions`` from ``role``'s grant on exactly ``resource`` (no-op if absent)."""
        request = admin_pb2.RevokePermissionRequest(
            grant=grant_to_proto(role, kind, resource, actions))

        async def revoke() -> None:
            await self._call(self._connection.admin.RevokePermission, request)
        await settled.again(f"RevokePermission {role}", revoke)

    async def list_permissions(self, role: str | None = None) -> list[PermissionGrant]:
        """Every grant (or ``role``'s), ordered by role, kind, resource. Needs a super-user."""
        request = admin_pb2.ListPermissionsRequest(role=role or "")
        response = await self._call(self._connection.admin.ListPermissions, request, retry=True)
        return [grant_from_proto(grant) for grant in response.grants]

    async def _call(self, method: aio.UnaryUnaryMultiCallable[Req, Resp], request: Req, *,
                    retry: bool = False) -> Resp:
        """``unary``, given up ``_WAIT_MARGIN_S`` past its deadline (``TimeoutError``:
        the outcome is unknown, as when the blocking face's wait ended)."""
        async with asyncio.timeout(self.timeout_s + _WAIT_MARGIN_S):
            return await self.unary(method, request, retry=retry)

    async def unary(self, method: aio.UnaryUnaryMultiCallable[Req, Resp], request: Req, *,
                    retry: bool = False) -> Resp:
        """One admin call (``Brokers.unary``); with ``retry`` (read-only calls), UNAVAILABLE
        is tried again.

        A pooled channel whose connection drops fails the calls in flight on
        it, and the next call dials a new connection: a read is repeated
        safely, a few times with backoff (~0.35 s in all, so a broker that
        is not there at all is still reported at once), within ``timeout_s``.
        With several brokers known, the call goes to the next one instead
        (``NoBrokerAvailableError`` when none answers), and a WrongHost
        answer (GetSegmentInfo, TruncateSegment in a cluster) is followed to
        the segment's owner.
        """
        return await self._brokers.unary(method, request, timeout_s=self.timeout_s, retry=retry)

    # -- transactions by id -------------------------------------------------------

    async def commit_transactions(self, txn_ids: Sequence[bytes], *, commit_key: str = "",
                            commit_sequence: int = 0) -> bool:
        """``CommitTxn``: commits open transactions (``Transaction.txn_id``) atomically.

        With ``commit_key`` the commit is idempotent: the broker remembers
        the highest ``commit_sequence`` committed per key, and a repeated
        ``(commit_key, commit_sequence)`` commits nothing and aborts
        ``txn_ids`` instead (``Transaction.detach`` hands a transaction over
        for this, e.g. from a Spark task to its driver).

        Returns:
            True when committed now; False when ``(commit_key,
            commit_sequence)`` had been committed before.

        Raises:
            TxnStateError: a transaction is not OPEN (``actual`` says what it is).
            TxnNotFoundError: the broker does not know a transaction.
            InvalidArgumentError: no ids, an id not 16 bytes, a negative sequence.
        """
        request = transactions_pb2.CommitTxnRequest(
            txn_ids=list(txn_ids), commit_key=commit_key, commit_sequence=commit_sequence)
        return await settled.commit_txns(self, request)

    async def abort_transaction(self, txn_id: bytes) -> None:
        """``AbortTxn``: nothing of the open transaction ``txn_id`` ever becomes visible.

        Raises:
            TxnStateError: it is not OPEN (committed, aborted, timed out).
            TxnNotFoundError: the broker does not know it.
        """
        await settled.abort_txn(self, txn_id)

    async def abort_transactions(self, label: str, keep: Sequence[bytes] = (), *,
                           close: bool = False) -> list[bytes]:
        """``AbortTxns``: aborts every open transaction begun with ``label`` but ``keep``.

        For a job whose tasks each begin a transaction with the job's label
        (``TransactionalWriter.begin(label=...)``): after committing the ids
        it received (``commit_transactions``), it aborts the others, whose
        ids never reached it, at once instead of at their timeouts (which
        hold ``read_committed`` readers of the segments they touched).
        Transactions of the label already committed or aborted are left as
        they are. A call whose answer was lost is made again: the ids the
        lost call aborted are then not in the answer.

        With ``close`` the label is closed as well: a later ``begin`` with it
        fails (``TxnFailedError``), so a task still running when its job
        ended cannot leave a transaction open behind the sweep. The broker
        remembers closed labels for an hour, in memory (not across its
        restart).

        Returns:
            The ids of the transactions aborted.

        Raises:
            InvalidArgumentError: an empty or too long label (256 bytes of
                UTF-8 at most), an id in ``keep`` not 16 bytes.
        """
        return await settled.abort_txns(self, transactions_pb2.AbortTxnsRequest(
            label=label, keep=list(keep), close=close))

    async def transaction_status(self, txn_id: bytes) -> TxnStatus:
        """The coordinator's state of ``txn_id`` (``TxnStatus``: OPEN, COMMITTED, ABORTED ...).

        How to learn the outcome of a commit that raised
        ``FolioUnavailableError`` (``Transaction.commit``,
        ``commit_transactions``): ``.committed`` (COMMITTING or COMMITTED)
        means the broker took it.

        Raises:
            TxnNotFoundError: the broker does not know it (or forgot it, long finished).
            InvalidArgumentError: ``txn_id`` is not 16 bytes.
        """
        response = await self._call(self._connection.transactions.GetTxnStatus,
                              transactions_pb2.GetTxnStatusRequest(txn_id=txn_id), retry=True)
        return TxnStatus.from_wire(response.state)


def _config(**values: int | None) -> admin_pb2.TopicConfig:
    """A ``TopicConfig`` message with the given (non-None) fields set."""
    return admin_pb2.TopicConfig(**{k: v for k, v in values.items() if v is not None})

