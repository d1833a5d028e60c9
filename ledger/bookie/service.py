"""The bookie over gRPC, server side: a thin servicer and a server starter.

``BookieServicer`` decodes a request, calls a ``BookieClient`` (the in-process
``ledger.bookie.bookie.Bookie``) and encodes the answer; a domain error becomes a
status through ``ledger.status`` (code, message, and trailing metadata that
names the exact error). ``start_bookie_server`` serves one bookie with gRPC
health checking and server reflection. The other end of the protocol,
``GrpcBookieClient``, is in ``ledger.bookie.remote``.

The add path is the hot one: its cost per entry is three list comprehensions
over the request's repeated ``Entry`` (and the protobuf parse before them).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Final, NoReturn

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

# The asyncio health servicer; grpc_health exposes it as ``health.aio``, which
# its type stubs do not know, so it is imported from its module.
from grpc_health.v1._async import HealthServicer as AsyncHealthServicer
from grpc_reflection.v1alpha import reflection

from ledger._proto.v1 import bookie_pb2, bookie_pb2_grpc
from ledger.api import AddRequest, BookieClient
from ledger.errors import InvalidArgumentError
from ledger.security.tls import ServerTls, server_credentials
from ledger.status import status_for, trailing_metadata_for

__all__ = [
    "MAX_MESSAGE_BYTES",
    "SERVICE_NAME",
    "BookieServicer",
    "host_port",
    "listen",
    "start_bookie_server",
]

log = logging.getLogger(__name__)

#: Full name of the bookie service, as health checks and reflection know it.
SERVICE_NAME: Final[str] = bookie_pb2.DESCRIPTOR.services_by_name["Bookie"].full_name

#: Largest message either side sends or accepts. One add may carry many
#: entries of up to 5 MiB each (``LedgerConfig.max_add_request_bytes``, and a
#: group commit may reach ``BookieConfig.max_batch_bytes``), so gRPC's 4 MiB
#: default would refuse ordinary traffic.
MAX_MESSAGE_BYTES: Final = 256 * 1024 * 1024

_SERVER_OPTIONS: Final[tuple[tuple[str, Any], ...]] = (
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.keepalive_time_ms", 60_000),
    ("grpc.keepalive_timeout_ms", 20_000),
    ("grpc.keepalive_permit_without_calls", 1),
    # Accept the clients' 30 s pings; the default (5 min) would answer them
    # with GOAWAY "too_many_pings". The server-side name of this setting is
    # ``min_ping_interval_without_data_ms`` (gRPC core's
    # GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS); an unknown name
    # would be ignored without a word.
    ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
    ("grpc.http2.max_ping_strikes", 0),
    # gRPC sets SO_REUSEPORT by default on Linux: a second bookie on the same
    # port would then bind "successfully" and share the traffic. Refuse it.
    ("grpc.so_reuseport", 0),
)

_Context = grpc.aio.ServicerContext[Any, Any]


async def _abort(context: _Context, error: Exception) -> NoReturn:
    code, message = status_for(error)
    if code is grpc.StatusCode.INVALID_ARGUMENT:
        log.warning("refused a bookie request from %s: %s", context.peer(), message)
    else:
        log.debug("bookie request from %s answered %s: %s", context.peer(), code.name, message)
    await context.abort(code, message, trailing_metadata_for(error))


class BookieServicer(bookie_pb2_grpc.BookieServicer):
    """The ``folio.ledger.v1.Bookie`` service over one ``BookieClient``.

    Holds no logic: every check and every ordering promise is the bookie's.

    Args:
        bookie: the bookie requests are applied to (normally ``ledger.bookie.bookie.Bookie``).
    """

    def __init__(self, bookie: BookieClient) -> None:
        self._bookie = bookie

    async def AddEntries(
        self, request: bookie_pb2.AddEntriesRequest, context: _Context
    ) -> bookie_pb2.AddEntriesResponse:
        """See ``BookieClient.add_entries``."""
        entries = request.entries
        add = AddRequest(
            request.ledger_id,
            [entry.entry_id for entry in entries],
            [entry.length for entry in entries],
            [entry.data for entry in entries],
            request.last_add_confirmed,
            request.recovery,
        )
        try:
            # The one check the in-process bookie does not need: its callers
            # compute lengths, while the wire can carry a negative one, which
            # the storage cannot encode.
            if add.lengths and min(add.lengths) < 0:
                raise InvalidArgumentError(
                    "entry lengths must be >= 0", ledger_id=request.ledger_id
                )
            await self._bookie.add_entries(add)
        except Exception as error:
            await _abort(context, error)
        return bookie_pb2.AddEntriesResponse(
            ledger_id=request.ledger_id, last_entry_id=add.entry_ids[-1]
        )

    async def ReadEntries(
        self, request: bookie_pb2.ReadEntriesRequest, context: _Context
    ) -> bookie_pb2.ReadEntriesResponse:
        """See ``BookieClient.read_entries``."""
        try:
            result = await self._bookie.read_entries(
                request.ledger_id, request.first_entry_id, request.last_entry_id,
                fence=request.fence, max_bytes=request.max_bytes,
            )
        except Exception as error:
            await _abort(context, error)
        entry = bookie_pb2.Entry
        return bookie_pb2.ReadEntriesResponse(
            entries=[
                entry(entry_id=entry_id, length=length, data=data)
                for entry_id, length, data in zip(
                    result.entry_ids, result.lengths, result.datas, strict=True
                )
            ],
            last_add_confirmed=result.last_add_confirmed,
            last_entry_id=result.last_entry_id,
        )

    async def ReadLastAddConfirmed(
        self, request: bookie_pb2.ReadLastAddConfirmedRequest, context: _Context
    ) -> bookie_pb2.ReadLastAddConfirmedResponse:
        """See ``BookieClient.read_last_add_confirmed``."""
        try:
            tail = await self._bookie.read_last_add_confirmed(request.ledger_id)
        except Exception as error:
            await _abort(context, error)
        return bookie_pb2.ReadLastAddConfirmedResponse(
            last_add_confirmed=tail.last_add_confirmed,
            last_entry_id=tail.last_entry_id,
            fenced=tail.fenced,
        )

    async def Fence(
        self, request: bookie_pb2.FenceRequest, context: _Context
    ) -> bookie_pb2.FenceResponse:
        """See ``BookieClient.fence``."""
        try:
            tail = await self._bookie.fence(request.ledger_id)
        except Exception as error:
            await _abort(context, error)
        return bookie_pb2.FenceResponse(
            last_add_confirmed=tail.last_add_confirmed, last_entry_id=tail.last_entry_id
        )

    async def DeleteLedger(
        self, request: bookie_pb2.DeleteLedgerRequest, context: _Context
    ) -> bookie_pb2.DeleteLedgerResponse:
        """See ``BookieClient.delete_ledger``."""
        try:
            await self._bookie.delete_ledger(request.ledger_id)
        except Exception as error:
            await _abort(context, error)
        return bookie_pb2.DeleteLedgerResponse()


def host_port(host: str, port: int) -> str:
    """``host:port``, with an IPv6 host in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


async def listen(server: grpc.aio.Server, host: str, port: int,
                 tls: ServerTls | None = None) -> int:
    """Bind ``server`` to ``host:port`` (0: any free port); returns the bound port.

    With ``tls`` enabled the port serves TLS (mutual when it names a CA) and
    reloads its certificate files when they change (``ledger.security.tls``).

    Raises:
        OSError: the address cannot be bound (the server is stopped first).
        TlsConfigError: a TLS file cannot be read or is not valid PEM.
    """
    address = host_port(host, port)
    try:
        if tls is not None and tls.enabled:
            return server.add_secure_port(address, server_credentials(tls))
        return server.add_insecure_port(address)
    except RuntimeError as error:
        await server.stop(None)
        raise OSError(
            f"cannot listen on {address} (port in use or address not available)"
        ) from error


async def start_bookie_server(
    bookie: BookieClient, host: str = "127.0.0.1", port: int = 0, *,
    tls: ServerTls | None = None,
    interceptors: Sequence[grpc.aio.ServerInterceptor[Any, Any]] = (),
) -> tuple[grpc.aio.Server, int]:
    """Serve ``bookie`` over gRPC, with health checking and reflection, and start.

    Health reports ``folio.ledger.v1.Bookie`` (and the server, ``""``) as
    SERVING. The caller stops the server (``await server.stop(grace)``) and
    then shuts the bookie down, in that order, so in-flight adds complete.

    Args:
        bookie: the bookie to serve (normally ``ledger.bookie.bookie.Bookie``).
        host: the address to listen on.
        port: the port; 0 picks a free one.
        tls: serve TLS with these files (mutual TLS when a CA is given).
        interceptors: run before every call (``ledger.security.interceptor``:
            only authenticated brokers may call a bookie).

    Returns:
        The started server and the port it listens on.

    Raises:
        OSError: the address cannot be bound (port in use, unknown host).
    """
    server = grpc.aio.server(options=_SERVER_OPTIONS, interceptors=list(interceptors) or None)
    bookie_pb2_grpc.add_BookieServicer_to_server(BookieServicer(bookie), server)
    health = AsyncHealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health, server)
    reflection.enable_server_reflection(
        (SERVICE_NAME, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
         reflection.SERVICE_NAME),
        server,
    )
    bound = await listen(server, host, port, tls)
    await health.set(SERVICE_NAME, health_pb2.HealthCheckResponse.SERVING)
    await server.start()
    log.info("bookie serving on %s", host_port(host, bound))
    return server, bound
