"""The client's bounded pool of connections to its broker (PDP-36).

A :class:`ConnectionPool` holds at most ``max_connections`` channels to one
endpoint (a :class:`folio._transport.io_thread.Connection` each: one gRPC channel, one TCP
connection, one shared Append stream). Every *flow* — one writer's appends to
one segment, or one reader's Read stream of one segment — goes to the channel
with the fewest flows; a new channel is opened only while every open one has
flows and the pool is under its maximum. So the number of TCP connections
stays bounded however many writers, readers and segments a client has.

On a channel, append flows have ids unique to its Append stream and replies
are routed to them by ``request_id >> 32`` (``folio._transport.append_stream``). Closing
a writer or reader ends its flows, never the channel. When a channel's Append
stream breaks, gRPC dials a new TCP connection for the channel, the stream
opens again and each of its flows sets itself up again and resends what was
not acknowledged; Read streams reopen from their next offset on the same
channel.

Admin calls use the first channel, opened with the pool. Everything here runs
on the client's IO thread, except :meth:`ConnectionPool.stats` which may also
be read from another thread (it copies counters only).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from folio._transport.defaults import DEFAULT_MAX_CONNECTIONS
from folio._transport.io_thread import Connection
from folio.errors import FolioUnavailableError, InvalidArgumentError
from folio.security import PLAIN, ChannelSecurity

if TYPE_CHECKING:
    from grpc import aio

    from folio._transport.append_stream import AppendFlow, AppendStream
    from folio.api.v1.read_pb2_grpc import ReadAsyncStub

__all__ = [
    "DEFAULT_MAX_CONNECTIONS",
    "ConnectionPool",
    "ConnectionStats",
    "PoolStats",
    "ReadChannels",
    "ReadLease",
]



@dataclass(frozen=True, slots=True)
class ConnectionStats:
    """One channel of a client's pool, as ``Client.pool_stats`` saw it.

    Attributes:
        index: its place in the pool (0 also carries the admin calls).
        flows: ``append_flows + read_flows``: what least-busy counts.
        append_flows: writers' segment flows on its Append stream.
        read_flows: readers' segment Read streams on it.
        state: gRPC connectivity of the channel: ``idle``, ``connecting``,
            ``ready``, ``transient_failure`` or ``shutdown``.
        stream_connected: whether its Append stream is open now.
        stream_restarts: how many times its Append stream broke and was
            opened again (on a new TCP connection when the old one died).
    """

    index: int
    flows: int
    append_flows: int
    read_flows: int
    state: str
    stream_connected: bool
    stream_restarts: int


@dataclass(frozen=True, slots=True)
class PoolStats:
    """A client's connection pool: its endpoint, its limit and its open channels."""

    endpoint: str
    max_connections: int
    connections: tuple[ConnectionStats, ...]

    @property
    def open_connections(self) -> int:
        """How many channels are open (at most ``max_connections``)."""
        return len(self.connections)

    @property
    def flows(self) -> int:
        """Flows on every channel together."""
        return sum(connection.flows for connection in self.connections)


class ReadLease:
    """One Read stream's hold on a channel: its stub, until ``release``."""

    __slots__ = ("_connection", "channel", "stub")

    def __init__(self, connection: Connection) -> None:
        self._connection: Connection | None = connection
        connection.read_flows += 1
        self.stub: ReadAsyncStub = connection.read
        #: The stub's channel (a broken stream waits for it to turn READY).
        self.channel: aio.Channel = connection.channel

    def release(self) -> None:
        """The stream ended: the channel has one flow fewer. Idempotent."""
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.read_flows -= 1


class ReadChannels(Protocol):
    """Where a reader's segment streams get their channel (the client's brokers)."""

    #: Whether segments are routed to their owners (a cluster).
    cluster: bool

    def lease_read(self, segment: str) -> ReadLease:
        """A channel of the segment's broker for one Read stream (IO thread)."""

    def owner_of(self, segment: str) -> str | None:
        """The segment's owner as last learnt, or None."""

    def moved(self, segment: str, owner: str | None) -> None:
        """A broker answered WrongHost for ``segment`` (naming ``owner`` when known)."""

    async def find_owner(self, segment: str, deadline: float | None) -> str:
        """The segment's owner, looked up (with backoff) until known or ``deadline``."""


class ConnectionPool:
    """At most ``max_connections`` channels to ``endpoint``; flows go least busy first.

    Made on the IO thread (it opens the first channel there) and used there.
    """

    def __init__(self, endpoint: str, max_connections: int = DEFAULT_MAX_CONNECTIONS,
                 security: ChannelSecurity = PLAIN) -> None:
        """Opens the first channel (connecting lazily, as gRPC does).

        Raises:
            InvalidArgumentError: ``max_connections`` below 1.
        """
        if max_connections < 1:
            raise InvalidArgumentError(
                f"max_connections_per_endpoint must be >= 1, not {max_connections}")
        self.endpoint = endpoint
        self.max_connections = max_connections
        self._security = security
        self._connections: list[Connection] = [Connection(endpoint, 0, security)]
        self._closed = False

    @property
    def admin(self) -> Connection:
        """The channel admin calls use (the first; it stays for the pool's life)."""
        return self._connections[0]

    @property
    def connections(self) -> tuple[Connection, ...]:
        """The open channels, oldest first."""
        return tuple(self._connections)

    def pick(self) -> Connection:
        """The channel for a new flow: an idle one, else a new one while under the
        maximum, else the one with the fewest flows (the oldest of equals).

        Raises:
            FolioUnavailableError: the pool is closed.
        """
        if self._closed:
            raise FolioUnavailableError("the client's connections are closed")
        best = min(self._connections, key=_flows)
        if best.flows and len(self._connections) < self.max_connections:
            best = Connection(self.endpoint, len(self._connections), self._security)
            self._connections.append(best)
        return best

    async def pick_async(self) -> Connection:
        """``pick`` as a coroutine, for callers off the IO thread (``IoThread.run``)."""
        return self.pick()

    def open_flow(self, flow: AppendFlow) -> tuple[AppendStream, int]:
        """Registers an append flow on the least busy channel's stream (``FlowSource``)."""
        stream = self.pick().append_stream
        return stream, stream.register(flow)

    def lease_read(self, segment: str = "") -> ReadLease:
        """A channel for one Read stream; ``release`` the lease when the stream ends.

        ``segment`` is not used: every segment of one pool is on one broker.
        """
        return ReadLease(self.pick())

    def stats(self) -> PoolStats:
        """The pool's figures now (no channels once closed)."""
        return PoolStats(
            endpoint=self.endpoint,
            max_connections=self.max_connections,
            connections=() if self._closed else tuple(
                ConnectionStats(
                    index=connection.index,
                    flows=connection.flows,
                    append_flows=connection.append_stream.flow_count,
                    read_flows=connection.read_flows,
                    state=connection.state,
                    stream_connected=connection.append_stream.connected,
                    stream_restarts=connection.append_stream.restarts,
                )
                for connection in list(self._connections)),
        )

    async def stats_async(self) -> PoolStats:
        """``stats`` as a coroutine, run on the IO thread."""
        return self.stats()

    async def close(self) -> None:
        """Closes every channel (their flows should have ended). Idempotent."""
        self._closed = True
        connections, self._connections = self._connections, self._connections[:1]
        for connection in connections:
            await connection.close()


def _flows(connection: Connection) -> int:
    return connection.flows
