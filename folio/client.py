"""The client: one per application; the factory of writers and readers (a facade).

A :class:`Client` is the blocking face over parts that own their state: one IO
thread (``folio._transport.io_thread``) running the loop everything else lives
on; the brokers (``folio._transport.brokers``), per broker a bounded pool of
connections (``folio._transport.pool``, PDP-36): at most
``max_connections_per_endpoint`` channels, each with one shared Append stream;
every writer's segment flow and every reader's segment stream goes to the least
busy channel of its segment's broker; the admin calls (``folio.admin.AdminCore``,
coroutines, shown here as blocking methods by ``folio._face.blocking``) use the
first channel of the admin broker. ``folio.aio.AsyncClient`` is the other face
over the same parts, on the caller's loop.
Which broker is which — bootstrap from an endpoint list, segment owners,
WrongHost — is ``folio._transport.brokers``. ``pool_stats`` shows the admin
broker's pool, ``broker_pool_stats`` every one. Each public method is a thin blocking
wrapper over a coroutine run on the IO thread, so an ``asyncio`` client can
await the same coroutines.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Awaitable, Coroutine
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar, cast, overload

from google.protobuf.message import Message
from grpc import aio

from folio._client_groups import GroupCalls
from folio._face import blocking, forward
from folio._transport.brokers import Brokers, parse_endpoints
from folio._transport.io_thread import Connection, IoThread
from folio._transport.pool import DEFAULT_MAX_CONNECTIONS, PoolStats
from folio.admin import AdminCore
from folio.config import (
    DEFAULT_CONNECT_TIMEOUT_S,
    DEFAULT_ENDPOINT,
    DEFAULT_TIMEOUT_S,
    ENDPOINT_ENV,
    ClientConfig,
)
from folio.errors import FolioError, InvalidArgumentError
from folio.models import DeserializationPolicy, SegmentRange
from folio.read.start import Start, ancestors, start_positions
from folio.security import TLS
from folio.serializers import BytesSerializer, Serializer

if TYPE_CHECKING:
    # Imported where made (below): a client that only makes admin calls (the CLI's
    # `topic list`) loads no reader, writer or transaction code, and no
    # prometheus_client (the metrics are made with the first writer or reader).
    from prometheus_client import CollectorRegistry

    from folio.metrics import TopicMetrics
    from folio.read.reader import EventReader, Isolation
    from folio.txn.txn import SingleRoutingKeyTransactionWriter
    from folio.txn.txn_full import TransactionalWriter
    from folio.write.writer import EventWriter

__all__ = ["DEFAULT_ENDPOINT", "ENDPOINT_ENV", "Client"]

log = logging.getLogger(__name__)

T = TypeVar("T")
Req = TypeVar("Req", bound=Message)
Resp = TypeVar("Resp", bound=Message)



class Client:
    """A connection to a Folio broker or cluster: admin calls, writers and readers.

    Thread-safe. A context manager; ``close`` closes the writers and readers
    it made. Every admin method raises the typed ``FolioError`` the broker
    answered (``TopicNotFoundError``, ``TopicExistsError``, ...),
    ``FolioUnavailableError`` when the broker cannot be reached
    (``NoBrokerAvailableError`` when none of several can), and
    ``TimeoutError`` after ``timeout_s``.
    """

    def __init__(self, endpoint: str | None = None, *, timeout_s: float = DEFAULT_TIMEOUT_S,
                 connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
                 max_connections_per_endpoint: int = DEFAULT_MAX_CONNECTIONS,
                 registry: CollectorRegistry | None = None,
                 config: ClientConfig | None = None, tls: TLS | None = None,
                 token: str | None = None, token_file: str | None = None) -> None:
        """Starts the IO thread and opens the first channel (connecting lazily).

        Args:
            endpoint: ``"host:port"``, or a comma-separated list of brokers of
                one cluster (``"host1:7070,host2:7070"``: the first call
                bootstraps from the first that answers, and the others are
                failover candidates); None for ``$FOLIO_CLIENT_ENDPOINT``,
                else ``$FOLIO_ENDPOINT``, else ``localhost:7070``. With one
                endpoint nothing is sent before the first call.
            timeout_s: deadline of each admin call, in seconds.
            connect_timeout_s: longest wait for the first connection to a
                broker, in seconds: nothing listening, another service or a
                TLS refusal fails within it with the reason
                (``FolioUnavailableError``, ``WrongEndpointError``, ``TlsError``).
            max_connections_per_endpoint: most channels (TCP connections)
                to each broker, shared by every writer and reader of this
                client; more are opened only as flows need them.
            registry: the Prometheus registry the SDK's metrics
                (``folio_client_*``, see ``folio.metrics``) go to; None for
                ``prometheus_client``'s default one. The collectors are
                registered there with the client's first writer or reader.
            config: every setting at once (``ClientConfig.load()`` reads
                a ``[client]`` TOML table and ``FOLIO_CLIENT_*``); then
                ``endpoint``, ``tls`` and the tokens must be None and the
                other arguments are not used.
            tls: speak TLS (``folio.TLS(ca=..., cert=..., key=...)``); None:
                plain text.
            token: a JWT sent as ``authorization: Bearer`` on every call.
            token_file: a file holding the JWT, re-read when it changes.

        Raises:
            InvalidArgumentError: a value out of range (``ClientConfig`` checks them),
                an endpoint list naming no endpoint, both ``config`` and another
                setting, or a TLS or token file that cannot be read.
        """
        if config is not None and (endpoint is not None or tls is not None
                                   or token is not None or token_file is not None):
            raise InvalidArgumentError("give either endpoint (with tls and token) or config, "
                                       "not both")
        #: The settings, resolved and checked (``folio.config``).
        self.config = config if config is not None else ClientConfig.resolve(
            endpoint, timeout_s=timeout_s, connect_timeout_s=connect_timeout_s,
            max_connections_per_endpoint=max_connections_per_endpoint, tls=tls,
            token=token, token_file=token_file)
        self._security = self.config.security()
        self.endpoint = self.config.endpoint
        #: The endpoints given, in order (one unless a list was given).
        self.endpoints = parse_endpoints(self.endpoint)
        self._registry = registry
        self.timeout_s = self.config.timeout_s
        self.max_connections_per_endpoint = self.config.max_connections_per_endpoint
        self._io = IoThread(f"folio-io-{self.endpoints[0]}")
        self._brokers: Brokers = self._io.run(self._open(), timeout=self.timeout_s)
        self._io.on_close = self._brokers.close  # channels close before the loop does
        #: The admin calls (coroutines run on the IO thread; see the methods below).
        self._admin = AdminCore(self._brokers, self.timeout_s)
        #: Reader groups, batch reads and Kafka groups (blocking calls over this client).
        self._group_calls = GroupCalls(self)
        self._lock = threading.Lock()
        self._writers: list[EventWriter[Any]] = []
        self._readers: list[EventReader[Any]] = []
        self._closed = False

    @classmethod
    def from_config(cls, config: ClientConfig, *,
                    registry: CollectorRegistry | None = None) -> Client:
        """A client made with ``config`` (see ``__init__`` for ``registry``)."""
        return cls(registry=registry, config=config)

    def _topic_metrics(self, topic: str) -> TopicMetrics:
        """The SDK's collectors of ``topic`` in the client's registry, made on first use."""
        from folio.metrics import client_metrics  # noqa: PLC0415

        return client_metrics(self._registry).for_topic(topic)

    async def _open(self) -> Brokers:
        return Brokers(self.endpoints, self.max_connections_per_endpoint, self._security,
                       connect_timeout_s=self.config.connect_timeout_s)

    def _flow_pool(self) -> Brokers:
        """Where new flows and Read streams take their channels (their segment's broker)."""
        if self._closed:
            raise FolioError("the client is closed")
        return self._brokers

    def pool_stats(self) -> PoolStats:
        """The admin broker's connection pool: open channels and the flows on each.

        With one broker (a standalone) that is every connection of the
        client; in a cluster see ``broker_pool_stats``. Callable from any
        thread, the SDK's IO thread included (e.g. in a write future's callback).
        """
        pool = self._brokers.admin_pool
        if self._io.in_io_thread:
            return pool.stats()
        try:
            return self._io.run(pool.stats_async(), timeout=self.timeout_s)
        except RuntimeError:  # the client is closed, and so is its IO thread
            return pool.stats()

    @property
    def admin_endpoint(self) -> str:
        """The broker admin calls go to now (the first endpoint until bootstrap or failover)."""
        return self._brokers.admin_address

    def broker_pool_stats(self) -> dict[str, PoolStats]:
        """Every broker's connection pool, by the address it dials (any thread)."""
        if self._io.in_io_thread:
            return self._brokers.pool_stats()
        try:
            return self._io.run(self._brokers.pool_stats_async(), timeout=self.timeout_s)
        except RuntimeError:  # the client is closed, and so is its IO thread
            return self._brokers.pool_stats()

    # -- admin (folio.admin.AdminCore, each run on the IO thread) ---------------

    create_topic = blocking(AdminCore.create_topic)
    get_topic = blocking(AdminCore.get_topic)
    list_topics = blocking(AdminCore.list_topics)
    describe_cluster = blocking(AdminCore.describe_cluster)
    delete_topic = blocking(AdminCore.delete_topic)
    update_topic_config = blocking(AdminCore.update_topic_config)
    get_segments = blocking(AdminCore.get_segments)
    scale_topic = blocking(AdminCore.scale_topic)
    get_successors = blocking(AdminCore.get_successors)
    seal_topic = blocking(AdminCore.seal_topic)
    get_segment_info = blocking(AdminCore.get_segment_info)
    truncate_segment = blocking(AdminCore.truncate_segment)
    grant_permission = blocking(AdminCore.grant_permission)
    revoke_permission = blocking(AdminCore.revoke_permission)
    list_permissions = blocking(AdminCore.list_permissions)
    commit_transactions = blocking(AdminCore.commit_transactions)
    abort_transaction = blocking(AdminCore.abort_transaction)
    abort_transactions = blocking(AdminCore.abort_transactions)
    transaction_status = blocking(AdminCore.transaction_status)

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Runs a core coroutine on the IO thread and waits (it bounds its own time)."""
        return self._io.run(coro)

    @property
    def _connection(self) -> Connection:
        """The channel of admin calls now (the admin broker's; it changes on failover)."""
        return self._brokers.admin

    def _call(self, method: aio.UnaryUnaryMultiCallable[Req, Resp], request: Req, *,
              retry: bool = False) -> Resp:
        """One admin call on the IO thread (``AdminCore._call``); reader groups, Kafka groups
        and transactional writers make theirs through it."""
        return self._io.run(self._admin._call(method, request, retry=retry))

    def _unary(self, method: aio.UnaryUnaryMultiCallable[Req, Resp], request: Req, *,
               retry: bool = False) -> Awaitable[Resp]:
        """``AdminCore.unary``: the call as a coroutine for the IO thread."""
        return self._admin.unary(method, request, retry=retry)

    async def _successors_async(self, segment: str) -> list[SegmentRange]:
        """A segment's successors, on the IO thread (writers and readers following a seal)."""
        return await self._admin.successors(segment)

    # -- groups and batch reads (folio._client_groups.GroupCalls) -------------------

    list_groups = forward(GroupCalls.list_groups, "_group_calls")
    kafka_group = forward(GroupCalls.kafka_group, "_group_calls")
    reader_group = forward(GroupCalls.reader_group, "_group_calls")
    delete_reader_group = forward(GroupCalls.delete_reader_group, "_group_calls")
    list_reader_groups = forward(GroupCalls.list_reader_groups, "_group_calls")
    batch_client = forward(GroupCalls.batch_client, "_group_calls")

    # -- writers and readers ----------------------------------------------------

    @overload
    def writer(self, topic: str, *, linger_ms: float = ..., batch_size_bytes: int = ...,
               max_in_flight: int = ..., delivery_timeout_ms: int = ...,
               writer_id: str | None = ...) -> EventWriter[bytes]: ...

    @overload
    def writer(self, topic: str, serializer: Serializer[T], *, linger_ms: float = ...,
               batch_size_bytes: int = ..., max_in_flight: int = ...,
               delivery_timeout_ms: int = ..., writer_id: str | None = ...) -> EventWriter[T]: ...

    def writer(self, topic: str, serializer: Serializer[Any] | None = None, *,
               linger_ms: float = 5.0, batch_size_bytes: int = 256 * 1024,
               max_in_flight: int = 5, delivery_timeout_ms: int = 120_000,
               writer_id: str | None = None) -> EventWriter[Any]:
        """A writer of events to ``topic``.

        Args:
            topic: the topic.
            serializer: turns events into payloads (``BytesSerializer`` by default).
            linger_ms: a batch's longest wait after its first event (cut sooner when idle or acked).
            batch_size_bytes: send a segment's batch once it holds this many
                bytes (capped just below the broker's 4 MiB block limit).
            max_in_flight: unacknowledged blocks per segment before
                ``write_event`` waits.
            delivery_timeout_ms: give up retrying a block after this long;
                its events fail with ``DeliveryTimeoutError``.
            writer_id: the writer's identity for de-duplication (default a
                new UUID). Reuse one only for the same logical writer.

        Raises:
            TopicNotFoundError: no such topic.
            InvalidArgumentError: a bad option value.
        """
        info = self.get_topic(topic)
        pool = self._flow_pool()
        from folio.write.writer import EventWriter  # noqa: PLC0415

        made: EventWriter[Any] = EventWriter(
            info, serializer if serializer is not None else BytesSerializer(), io=self._io,
            stream=pool, linger_ms=linger_ms,
            batch_size_bytes=batch_size_bytes, max_in_flight=max_in_flight,
            delivery_timeout_ms=delivery_timeout_ms, writer_id=writer_id,
            on_close=self._forget_writer, successors=self._successors_async,
            metrics=self._topic_metrics(info.name))
        with self._lock:
            self._writers.append(made)
        return made

    @overload
    def single_routing_key_txn_writer(
        self, topic: str, routing_key: str, *, txn_timeout_ms: int = ...,
        writer_id: str | None = ...) -> SingleRoutingKeyTransactionWriter[bytes]: ...

    @overload
    def single_routing_key_txn_writer(
        self, topic: str, routing_key: str, serializer: Serializer[T], *,
        txn_timeout_ms: int = ..., writer_id: str | None = ...,
    ) -> SingleRoutingKeyTransactionWriter[T]: ...

    def single_routing_key_txn_writer(
        self, topic: str, routing_key: str, serializer: Serializer[Any] | None = None, *,
        txn_timeout_ms: int = 60_000, writer_id: str | None = None,
    ) -> SingleRoutingKeyTransactionWriter[Any]:
        """A writer of single-routing-key transactions (PDP-44) to ``topic``; see ``folio.txn.txn``.

        Args:
            topic: the topic.
            routing_key: the key of every event of its transactions.
            serializer: turns events into payloads (``BytesSerializer`` by default).
            txn_timeout_ms: a transaction not committed this long after
                ``begin`` is aborted and its buffer released.
            writer_id: the writer's identity for de-duplication (default a
                new UUID). Reuse one only for the same logical writer.

        Raises:
            TopicNotFoundError: no such topic.
            InvalidArgumentError: a bad option value.
        """
        info = self.get_topic(topic)
        from folio.txn.txn import SingleRoutingKeyTransactionWriter  # noqa: PLC0415

        made: SingleRoutingKeyTransactionWriter[Any] = SingleRoutingKeyTransactionWriter(
            info, routing_key, serializer if serializer is not None else BytesSerializer(),
            io=self._io, source=self._flow_pool(), txn_timeout_ms=txn_timeout_ms,
            writer_id=writer_id, on_close=lambda w: self._forget_writer(cast(Any, w)),
            successors=self._successors_async)
        with self._lock:
            # close() closes it with the event writers (same close(timeout) shape).
            self._writers.append(cast(Any, made))
        return made

    @overload
    def transactional_writer(self, topic: str, *,
                             txn_timeout_ms: int = ...) -> TransactionalWriter[bytes]: ...

    @overload
    def transactional_writer(self, topic: str, serializer: Serializer[T], *,
                             txn_timeout_ms: int = ...) -> TransactionalWriter[T]: ...

    def transactional_writer(self, topic: str, serializer: Serializer[Any] | None = None, *,
                             txn_timeout_ms: int = 60_000) -> TransactionalWriter[Any]:
        """A writer of transactions across ``topic``'s segments; see ``folio.txn.txn_full``.

        Args:
            topic: the topic.
            serializer: turns events into payloads (``BytesSerializer`` by default).
            txn_timeout_ms: the broker aborts a transaction still open this
                long after ``begin`` (TIMED_OUT); at most one day.

        Raises:
            TopicNotFoundError: no such topic.
            InvalidArgumentError: a bad option value.
        """
        info = self.get_topic(topic)
        from folio.txn.txn_full import TransactionalWriter  # noqa: PLC0415

        made: TransactionalWriter[Any] = TransactionalWriter(
            info, serializer if serializer is not None else BytesSerializer(), io=self._io,
            source=self._flow_pool(), stub=self._connection.transactions, call=self._call,
            txn_timeout_ms=txn_timeout_ms,
            on_close=lambda w: self._forget_writer(cast(Any, w)),
            describe=lambda: self.get_topic(topic))
        with self._lock:
            # close() aborts its open transactions with the event writers.
            self._writers.append(cast(Any, made))
        return made

    @overload
    def reader(self, topic: str, start: Start = ..., *,
               isolation: Isolation = ...,
               on_deserialization_error: DeserializationPolicy = ...) -> EventReader[bytes]: ...

    @overload
    def reader(self, topic: str, start: Start = ..., *,
               serializer: Serializer[T], isolation: Isolation = ...,
               on_deserialization_error: DeserializationPolicy = ...) -> EventReader[T]: ...

    @overload
    def reader(self, topic: str, start: Start, serializer: Serializer[T], *,
               isolation: Isolation = ...,
               on_deserialization_error: DeserializationPolicy = ...) -> EventReader[T]: ...

    def reader(self, topic: str, start: Start = "earliest",
               serializer: Serializer[Any] | None = None, *,
               isolation: Isolation = "read_committed",
               on_deserialization_error: DeserializationPolicy = "raise") -> EventReader[Any]:
        """A reader of ``topic``, following its segments across scaling.

        A segment read to its seal is followed by its successors, each started once
        all its predecessors the reader reads are read to their end (write order per key).

        Args:
            topic: the topic.
            start: ``"earliest"`` (the topic's first segments, those without
                predecessors, from their first readable event, then their
                successors), ``"latest"`` (only events written to the active
                segments after this call), or a mapping of segment name to
                the offset to start at (or a ``StreamCut``/``Checkpoint``); active
                segments it leaves out start at their earliest (as the CLI's --from-offset).
            serializer: turns payloads into values (``BytesSerializer`` by default).
            isolation: ``"read_committed"`` (the default: events of
                transactions are served once committed, never when aborted;
                a segment's stream waits before an open transaction's first
                event) or ``"read_uncommitted"`` (every event, as written).
            on_deserialization_error: a payload ``serializer`` cannot decode:
                ``"raise"`` (the default: ``read_next`` raises
                ``DeserializationError`` and the reader stays on the event until
                ``reader.skip(error)``), ``"skip"`` (logged, stepped over) or
                ``"raw"`` (returned as an ``UndecodedEvent`` of its bytes).

        Raises:
            TopicNotFoundError: no such topic.
            InvalidArgumentError: a bad ``start``, ``isolation`` or
                ``on_deserialization_error``, or a mapping naming a segment of
                another topic.
        """
        every = self.get_segments(topic, include_sealed=True)
        positions = start_positions(topic, every, start)
        pool = self._flow_pool()
        from folio.read.reader import EventReader  # noqa: PLC0415

        made: EventReader[Any] = EventReader(
            topic, positions, serializer if serializer is not None else BytesSerializer(),
            io=self._io, channels=pool, on_close=self._forget_reader, isolation=isolation,
            successors=self._successors_async, metrics=self._topic_metrics(topic),
            read_before=ancestors(every, positions),
            on_deserialization_error=on_deserialization_error)
        with self._lock:
            self._readers.append(made)
        return made

    def _forget_writer(self, writer: EventWriter[Any]) -> None:
        with self._lock:
            if writer in self._writers:
                self._writers.remove(writer)

    def _forget_reader(self, reader: EventReader[Any]) -> None:
        with self._lock:
            if reader in self._readers:
                self._readers.remove(reader)

    # -- lifecycle --------------------------------------------------------------

    def close(self) -> None:
        """Closes the writers (flushing, within ``timeout_s``) and readers, then the channels.

        Idempotent. Flush failures of writers are logged, not raised: each
        event's future holds its outcome.
        """
        if self._closed:
            return
        with self._lock:
            writers, readers = list(self._writers), list(self._readers)
        for writer in writers:
            try:
                writer.close(self.timeout_s)
            except FolioError as error:
                log.warning("closing %r: %s", writer, error)
        for reader in readers:
            reader.close()
        self._closed = True
        self._io.close(self.timeout_s)  # its on_close closes the channels, then the loop

    @property
    def closed(self) -> bool:
        """Whether ``close`` was called."""
        return self._closed

    def __enter__(self) -> Client:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<folio.Client {self.endpoint}>"

