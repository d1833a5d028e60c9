"""The asyncio client: the same parts as ``folio.Client``, on the caller's event loop.

An :class:`AsyncClient` is made inside a running loop and lives on it: its
brokers (``folio._transport.brokers``: pooled ``grpc.aio`` channels, owners,
failover) are made there, its admin calls are ``folio.admin.AdminCore``'s
coroutines awaited there (``folio._face.awaiting``: the blocking face's
methods, signatures and docstrings, as coroutines), and its writers' and
readers' IO (``folio._transport.loop_io.LoopIo``) is that loop: no thread of
its own. Use it from that loop only; close it there (``async with``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar, cast, overload

from folio._face import awaiting
from folio._transport.brokers import Brokers, parse_endpoints
from folio._transport.loop_io import LoopIo, as_io_thread
from folio._transport.pool import DEFAULT_MAX_CONNECTIONS, PoolStats
from folio.admin import AdminCore
from folio.aio._batch import AsyncBatchClient
from folio.aio._groups import AsyncGroupReader, AsyncReaderGroup
from folio.aio._reader import AsyncEventReader
from folio.aio._txn import AsyncTxnWriter
from folio.aio._txn_full import AsyncTransactionalWriter
from folio.aio._writer import AsyncEventWriter
from folio.api.v1 import groups_pb2
from folio.config import DEFAULT_CONNECT_TIMEOUT_S, DEFAULT_TIMEOUT_S, ClientConfig
from folio.errors import FolioError, InvalidArgumentError
from folio.models import DeserializationPolicy
from folio.read._group_calls import _GroupClient
from folio.read._group_start import GroupStart
from folio.read.reader import EventReader, Isolation
from folio.read.start import Start, ancestors, start_positions
from folio.security import TLS
from folio.serializers import BytesSerializer, Serializer
from folio.txn.txn import SingleRoutingKeyTransactionWriter
from folio.write.writer import EventWriter

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from folio.metrics import TopicMetrics
    from folio.read.catalog import SegmentCatalog

__all__ = ["AsyncClient"]

log = logging.getLogger(__name__)

T = TypeVar("T")


class AsyncClient:
    """A connection to a Folio broker or cluster for asyncio code: admin calls, writers, readers.

    Made in a coroutine (it takes the running loop); used from that loop
    only. An async context manager; ``close`` closes the writers (flushing)
    and readers it made, then the channels. The admin coroutines raise what
    ``folio.Client``'s methods raise (the same ``FolioError`` types, and the
    same reconciliation of unknown outcomes).
    """

    def __init__(self, endpoint: str | None = None, *, timeout_s: float = DEFAULT_TIMEOUT_S,
                 connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
                 max_connections_per_endpoint: int = DEFAULT_MAX_CONNECTIONS,
                 registry: CollectorRegistry | None = None,
                 config: ClientConfig | None = None, tls: TLS | None = None,
                 token: str | None = None, token_file: str | None = None) -> None:
        """Opens the first channel on the running loop (connecting lazily).

        Takes the arguments of ``folio.Client`` (see there).

        Raises:
            RuntimeError: no event loop is running in this thread.
            InvalidArgumentError: as ``folio.Client``.
        """
        if config is not None and (endpoint is not None or tls is not None
                                   or token is not None or token_file is not None):
            raise InvalidArgumentError("give either endpoint (with tls and token) or config, "
                                       "not both")
        self._io = LoopIo()  # first: RuntimeError outside a running loop
        #: The settings, resolved and checked (``folio.config``).
        self.config = config if config is not None else ClientConfig.resolve(
            endpoint, timeout_s=timeout_s, connect_timeout_s=connect_timeout_s,
            max_connections_per_endpoint=max_connections_per_endpoint, tls=tls,
            token=token, token_file=token_file)
        self.endpoint = self.config.endpoint
        self.timeout_s = self.config.timeout_s
        self._registry = registry
        self._brokers = Brokers(parse_endpoints(self.endpoint),
                                self.config.max_connections_per_endpoint,
                                self.config.security(),
                                connect_timeout_s=self.config.connect_timeout_s)
        self._admin = AdminCore(self._brokers, self.timeout_s)
        self._writers: list[AsyncEventWriter[Any]] = []
        self._readers: list[AsyncEventReader[Any]] = []
        self._txn_writers: list[AsyncTxnWriter[Any]] = []
        self._full_writers: list[AsyncTransactionalWriter[Any]] = []
        self._group_readers: list[AsyncGroupReader[Any]] = []
        self._closed = False

    # -- admin (folio.admin.AdminCore, awaited on this loop) ----------------------

    create_topic = awaiting(AdminCore.create_topic)
    get_topic = awaiting(AdminCore.get_topic)
    list_topics = awaiting(AdminCore.list_topics)
    describe_cluster = awaiting(AdminCore.describe_cluster)
    delete_topic = awaiting(AdminCore.delete_topic)
    update_topic_config = awaiting(AdminCore.update_topic_config)
    get_segments = awaiting(AdminCore.get_segments)
    scale_topic = awaiting(AdminCore.scale_topic)
    get_successors = awaiting(AdminCore.get_successors)
    seal_topic = awaiting(AdminCore.seal_topic)
    get_segment_info = awaiting(AdminCore.get_segment_info)
    truncate_segment = awaiting(AdminCore.truncate_segment)
    grant_permission = awaiting(AdminCore.grant_permission)
    revoke_permission = awaiting(AdminCore.revoke_permission)
    list_permissions = awaiting(AdminCore.list_permissions)
    commit_transactions = awaiting(AdminCore.commit_transactions)
    abort_transaction = awaiting(AdminCore.abort_transaction)
    abort_transactions = awaiting(AdminCore.abort_transactions)
    transaction_status = awaiting(AdminCore.transaction_status)

    def pool_stats(self) -> PoolStats:
        """The admin broker's connection pool: open channels and the flows on each."""
        return self._brokers.admin_pool.stats()

    def broker_pool_stats(self) -> dict[str, PoolStats]:
        """Every broker's connection pool, by the address it dials."""
        return self._brokers.pool_stats()

    # -- writers and readers --------------------------------------------------------

    @overload
    async def writer(self, topic: str, *, linger_ms: float = ..., batch_size_bytes: int = ...,
                     max_in_flight: int = ..., delivery_timeout_ms: int = ...,
                     writer_id: str | None = ...) -> AsyncEventWriter[bytes]: ...

    @overload
    async def writer(self, topic: str, serializer: Serializer[T], *, linger_ms: float = ...,
                     batch_size_bytes: int = ..., max_in_flight: int = ...,
                     delivery_timeout_ms: int = ...,
                     writer_id: str | None = ...) -> AsyncEventWriter[T]: ...

    async def writer(self, topic: str, serializer: Serializer[Any] | None = None, *,
                     linger_ms: float = 5.0, batch_size_bytes: int = 256 * 1024,
                     max_in_flight: int = 5, delivery_timeout_ms: int = 120_000,
                     writer_id: str | None = None) -> AsyncEventWriter[Any]:
        """A writer of events to ``topic``; the arguments of ``folio.Client.writer``.

        Raises:
            TopicNotFoundError: no such topic.
            InvalidArgumentError: a bad option value.
        """
        info = await self.get_topic(topic)
        brokers = self._flow_pool()
        metrics = self._topic_metrics(info.name)

        def make(on_change: Callable[[], None]) -> EventWriter[bytes]:
            return EventWriter(
                info, BytesSerializer(), io=as_io_thread(self._io), stream=brokers,
                linger_ms=linger_ms, batch_size_bytes=batch_size_bytes,
                max_in_flight=max_in_flight, delivery_timeout_ms=delivery_timeout_ms,
                writer_id=writer_id, on_close=self._forget_writer_core,
                successors=self._admin.successors, metrics=metrics, on_change=on_change)

        made: AsyncEventWriter[Any] = AsyncEventWriter(
            make, serializer if serializer is not None else BytesSerializer(), self._io.loop)
        self._writers.append(made)
        return made

    async def single_routing_key_txn_writer(
            self, topic: str, routing_key: str, serializer: Serializer[Any] | None = None, *,
            txn_timeout_ms: int = 60_000, writer_id: str | None = None,
    ) -> AsyncTxnWriter[Any]:
        """A writer of single-routing-key transactions (PDP-44); the arguments of
        ``folio.Client.single_routing_key_txn_writer``.

        Raises:
            TopicNotFoundError: no such topic.
            InvalidArgumentError: a bad option value.
        """
        info = await self.get_topic(topic)
        core: SingleRoutingKeyTransactionWriter[Any] = SingleRoutingKeyTransactionWriter(
            info, routing_key, serializer if serializer is not None else BytesSerializer(),
            io=as_io_thread(self._io), source=self._flow_pool(), txn_timeout_ms=txn_timeout_ms,
            writer_id=writer_id, successors=self._admin.successors)
        made: AsyncTxnWriter[Any] = AsyncTxnWriter(core)
        self._txn_writers.append(made)
        return made

    @overload
    async def transactional_writer(self, topic: str, *, txn_timeout_ms: int = ...,
                                   ) -> AsyncTransactionalWriter[bytes]: ...

    @overload
    async def transactional_writer(self, topic: str, serializer: Serializer[T], *,
                                   txn_timeout_ms: int = ...) -> AsyncTransactionalWriter[T]: ...

    async def transactional_writer(self, topic: str, serializer: Serializer[Any] | None = None,
                                   *, txn_timeout_ms: int = 60_000,
                                   ) -> AsyncTransactionalWriter[Any]:
        """A writer of transactions across ``topic``'s segments (``folio.aio._txn_full``);
        the arguments of ``folio.Client.transactional_writer``.

        Raises:
            TopicNotFoundError: no such topic.
            InvalidArgumentError: a bad option value.
        """
        info = await self.get_topic(topic)
        made: AsyncTransactionalWriter[Any] = AsyncTransactionalWriter(
            info, serializer if serializer is not None else BytesSerializer(), io=self._io,
            source=self._flow_pool(), admin=self._admin, txn_timeout_ms=txn_timeout_ms)
        # close() aborts its open transactions with the other writers.
        self._full_writers = [*(w for w in self._full_writers if not w.closed), made]
        return made

    async def reader(self, topic: str, start: Start = "earliest",
                     serializer: Serializer[Any] | None = None, *,
                     isolation: Isolation = "read_committed",
                     on_deserialization_error: DeserializationPolicy = "raise",
                     ) -> AsyncEventReader[Any]:
        """A reader of ``topic``; the arguments of ``folio.Client.reader``.

        Raises:
            TopicNotFoundError: no such topic.
            InvalidArgumentError: a bad ``start``, ``isolation`` or
                ``on_deserialization_error``.
        """
        every = await self.get_segments(topic, include_sealed=True)
        positions = start_positions(topic, every, start)
        core: EventReader[Any] = EventReader(
            topic, positions, serializer if serializer is not None else BytesSerializer(),
            io=as_io_thread(self._io), channels=self._flow_pool(), isolation=isolation,
            successors=self._admin.successors, metrics=self._topic_metrics(topic),
            read_before=ancestors(every, positions),
            on_deserialization_error=on_deserialization_error)
        made: AsyncEventReader[Any] = AsyncEventReader(core)
        self._readers.append(made)
        return made

    async def reader_group(self, name: str, topics: list[str] | None = None,
                           start: GroupStart = "earliest", *, sync_interval_ms: int = 200,
                           session_timeout_ms: int | None = None) -> AsyncReaderGroup:
        """A reader group, created at ``start`` or opened; the arguments and errors of
        ``folio.Client.reader_group`` (``folio.aio._groups``)."""
        return await AsyncReaderGroup.open(name, self._groups(), topics, start,
                                           sync_interval_ms, session_timeout_ms,
                                           self.get_segments, self._admin.successors,
                                           self._group_readers)

    async def delete_reader_group(self, name: str) -> None:
        """Deletes a reader group. ``ReaderGroupNotFoundError``."""
        await self._groups().delete_async(name)

    async def list_reader_groups(self) -> list[str]:
        """Every reader group's name, sorted."""
        calls = self._groups()
        reply = await calls.unary(calls.stub.ListReaderGroups,
                                  groups_pb2.ListReaderGroupsRequest(), retry=True)
        return list(reply.names)

    def _groups(self) -> _GroupClient:
        brokers, admin = self._flow_pool(), self._admin

        def heartbeat(request: groups_pb2.HeartbeatRequest,
                      timeout_s: float) -> Awaitable[groups_pb2.HeartbeatResponse]:
            return brokers.unary(admin._connection.groups.Heartbeat, request,
                                 timeout_s=timeout_s, retry=True)

        def blocking(*args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("a folio.aio reader group makes no blocking calls")

        return _GroupClient(cast("SegmentCatalog", None), blocking, admin._call,
                            as_io_thread(self._io), brokers, lambda: admin._connection.groups,
                            heartbeat)

    def batch_client(self) -> AsyncBatchClient:
        """Lists segments (sealed too) between cuts and reads any of them from coroutines
        (``folio.aio._batch``; the blocking face's ``Client.batch_client``)."""
        return AsyncBatchClient(self._admin, self._io, self._flow_pool())

    def _check_loop(self) -> None:
        """``RuntimeError`` unless called on the loop the client was made on (its channels'
        loop: gRPC's ``grpc.aio`` objects work on that one only)."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is not self._io.loop:
            raise RuntimeError("a folio.aio client is used from the event loop it was made "
                               "on only (its channels live there)")

    def _flow_pool(self) -> Brokers:
        self._check_loop()
        if self._closed:
            raise FolioError("the client is closed")
        return self._brokers

    def _topic_metrics(self, topic: str) -> TopicMetrics:
        from folio.metrics import client_metrics  # noqa: PLC0415  (prometheus on first use)

        return client_metrics(self._registry).for_topic(topic)

    def _forget_writer_core(self, core: EventWriter[bytes]) -> None:
        self._writers = [w for w in self._writers if not w.closed]

    # -- lifecycle --------------------------------------------------------------------

    async def close(self) -> None:
        """Closes the writers (flushing, within ``timeout_s``; a transactional writer aborts
        its open transactions, as ``folio.Client.close``), readers and reader group
        members (each leaving its group), then the channels.

        Idempotent. Flush failures are logged, not raised: each event's
        future holds its outcome. Cancelling it still closes the channels.
        """
        if self._closed:
            return
        self._closed = True
        writers: list[AsyncEventWriter[Any] | AsyncTxnWriter[Any]
                      | AsyncTransactionalWriter[Any]] = [
            *self._writers, *self._txn_writers,
            *(w for w in self._full_writers if not w.closed)]
        self._writers, self._txn_writers, self._full_writers = [], [], []
        readers, self._readers = self._readers, []
        members, self._group_readers = self._group_readers, []
        try:
            for writer in writers:
                try:
                    async with asyncio.timeout(self.timeout_s):
                        await writer.close()
                except (FolioError, TimeoutError) as error:  # (the timeout: builtins')
                    log.warning("closing %r: %s", writer, error)
            for member in members:  # each leaves its group (one attempt, bounded)
                try:
                    async with asyncio.timeout(self.timeout_s):
                        await member.close()
                except TimeoutError as error:
                    log.warning("closing %r: %s", member, error)
        finally:
            for reader in readers:
                reader.close()
            await self._brokers.close()

    @property
    def closed(self) -> bool:
        """Whether ``close`` was called."""
        return self._closed

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, traceback: TracebackType | None) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"<folio.aio.AsyncClient {self.endpoint}>"
