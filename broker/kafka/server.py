"""The Kafka listener: an asyncio TCP server whose connections speak the Kafka protocol.

``KafkaServer.start`` binds (port 0: any free one; ``port`` says which) and
serves each accepted connection (its bytes: a ``FrameStream``, upgraded to TLS
first on an SSL listener) with a ``KafkaConnection`` in a task of its own, once
the connection quotas admit it (``broker.kafka.quotas.connections``: a refused
one is closed, after its throttle time if over its address's rate). ``stop`` closes
the listening socket, ends long polls, and closes every open connection
(clients reconnect elsewhere or later, as they do when a Kafka broker stops).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl

from broker.kafka.apis import dispatch_table
from broker.kafka.connection import PRE_AUTHENTICATION_MAX_FRAME_BYTES, KafkaConnection
from broker.kafka.context import KafkaContext
from broker.kafka.dispatch import DispatchTable
from broker.kafka.framing import DEFAULT_MAX_FRAME_BYTES, FrameStream
from broker.kafka.handlers.sasl import SaslSession
from broker.kafka.sasl.tls import certificate_role
from ledger.security.tokens import Principal

__all__ = ["KafkaServer"]

log = logging.getLogger(__name__)

#: Seconds a client has to complete its TLS handshake.
TLS_HANDSHAKE_TIMEOUT_S = 10.0


class KafkaServer:
    """Serves the Kafka protocol for ``context`` on ``bind_host:port``."""

    def __init__(self, context: KafkaContext, bind_host: str, port: int, *,
                 table: DispatchTable | None = None,
                 max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self._context = context
        self._bind_host = bind_host
        self._port = port
        self._table = table or dispatch_table()
        context.served = tuple((row.key, row.min_version, row.max_version)
                               for row in self._table.rows())
        self._max_frame_bytes = max_frame_bytes
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def port(self) -> int:
        """The bound port (after ``start``)."""
        return self._context.port

    async def start(self) -> None:
        """Bind and serve. ``OSError`` if the address is taken."""
        self._server = await asyncio.get_running_loop().create_server(
            self._stream, self._bind_host, self._port)
        sockets = self._server.sockets
        self._context.port = int(sockets[0].getsockname()[1]) if sockets else self._port
        log.info("kafka: listening on %s:%d (advertised %s:%d)", self._bind_host,
                 self._context.port, self._context.host,
                 self._context.advertised_port or self._context.port)

    def _stream(self) -> FrameStream:
        return FrameStream(self._max_frame_bytes, self._accepted)

    def _accepted(self, stream: FrameStream) -> None:
        """A new connection (in the transport's callback): serve it in a task of its own."""
        security = self._context.security
        if security is not None and security.tls is not None:
            stream.hold()  # the client's first bytes are its TLS handshake
        if security is not None and security.authenticator is not None:
            # Until SASL succeeds (the connection then lifts it), as Kafka's
            # sasl.server.max.receive.size: set before the first byte is read.
            stream.max_frame_bytes = min(PRE_AUTHENTICATION_MAX_FRAME_BYTES,
                                         self._max_frame_bytes)
        task = asyncio.ensure_future(self._serve(stream))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _serve(self, stream: FrameStream) -> None:
        gate = self._context.connection_quotas
        peer = stream.get_extra_info("peername")
        address = str(peer[0]) if isinstance(peer, tuple) else str(peer)
        if gate is None:
            await self._serve_admitted(stream)
            return
        try:
            admission = await gate.enter(address, self._context.listener)
            if not admission.admitted:
                # Kafka's delayed close: held unread for the throttle time first.
                await asyncio.sleep(admission.close_after_ms / 1000.0)
        except BaseException:  # stopped meanwhile
            stream.close()
            raise
        if not admission.admitted:
            stream.close()
            with contextlib.suppress(Exception):
                await stream.wait_closed()
            return
        try:
            await self._serve_admitted(stream)
        finally:
            gate.leave(address, self._context.listener)

    async def _serve_admitted(self, stream: FrameStream) -> None:
        connection = KafkaConnection(self._context, self._table, stream,
                                     max_frame_bytes=self._max_frame_bytes)
        try:
            secured = await self._secure(connection, stream)
        except BaseException:  # stopped during the TLS handshake: close, then go on stopping
            stream.close()
            raise
        if not secured:
            stream.close()
            with contextlib.suppress(Exception):
                await stream.wait_closed()
            return
        await connection.serve()

    async def _secure(self, connection: KafkaConnection, stream: FrameStream) -> bool:
        """TLS first when the listener is SSL; the connection's session. False: refused."""
        security = self._context.security
        if security is None:
            return True
        if security.tls is not None:
            try:
                await stream.start_tls(security.tls.context(), TLS_HANDSHAKE_TIMEOUT_S)
            except (OSError, ssl.SSLError, TimeoutError, ConnectionError) as error:
                security.refusals.refused("tls_handshake", connection.peer,
                                          f"{type(error).__name__}: {error}")
                return False
        principal = None
        if security.certificate_roles:
            ssl_object = stream.get_extra_info("ssl_object")
            role = certificate_role(None if ssl_object is None else ssl_object.getpeercert())
            if role is None:
                security.refusals.refused("no_client_certificate", connection.peer,
                                          "the client certificate has no CN (the role)")
                return False
            principal = Principal(role)
            connection.principal = principal
            stream.max_frame_bytes = self._max_frame_bytes
        if security.authenticates:
            connection.session = SaslSession(security, connection.peer, principal)
        return True

    async def stop(self) -> None:
        """Stop listening, end long polls and close every connection."""
        self._context.stopping.set()
        if self._context.quota_store is not None:
            await self._context.quota_store.close()
        if self._server is not None:
            self._server.close()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._server is not None:
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            self._server = None
