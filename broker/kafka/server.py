"""The Kafka listener: an asyncio TCP server whose connections speak the Kafka protocol.

``KafkaServer.start`` binds (port 0: any free one; ``port`` says which) and
serves each accepted connection with a ``KafkaConnection``. ``stop`` closes
the listening socket, ends long polls, and closes every open connection
(clients reconnect elsewhere or later, as they do when a Kafka broker stops).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from broker.kafka.apis import dispatch_table
from broker.kafka.connection import KafkaConnection
from broker.kafka.context import KafkaContext
from broker.kafka.dispatch import DispatchTable
from broker.kafka.framing import DEFAULT_MAX_FRAME_BYTES

__all__ = ["KafkaServer"]

log = logging.getLogger(__name__)


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
        self._server = await asyncio.start_server(self._accept, self._bind_host, self._port)
        sockets = self._server.sockets
        self._context.port = int(sockets[0].getsockname()[1]) if sockets else self._port
        log.info("kafka: listening on %s:%d (advertised %s:%d)", self._bind_host,
                 self._context.port, self._context.host,
                 self._context.advertised_port or self._context.port)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connection = KafkaConnection(self._context, self._table, reader, writer,
                                     self._max_frame_bytes)
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            await connection.serve()
        finally:
            if task is not None:
                self._tasks.discard(task)

    async def stop(self) -> None:
        """Stop listening, end long polls and close every connection."""
        self._context.stopping.set()
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
