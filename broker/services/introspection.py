"""Health and reflection, served so that tools of either generation and garbage get clean answers.

*Health*: the stock asyncio servicer, registered through ``broker.services._handlers``
so that a request that is not a ``HealthCheckRequest`` is answered
INVALID_ARGUMENT (the stock registration answers UNKNOWN and logs a traceback
per call, which a fuzzer turns into a log flood).

*Reflection*: grpcurl, Postman and recent grpc_cli speak
``grpc.reflection.v1``; older tools speak ``grpc.reflection.v1alpha``. The
installed grpcio-reflection ships only v1alpha. The two protocols are the same
messages under two package names (v1 was v1alpha promoted unchanged), so the
same servicer serves both: the v1 method is a second route to it, its requests
parsed as the wire-identical v1alpha messages.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any, Final

import grpc
from google.protobuf.message import DecodeError
from grpc_health.v1 import health_pb2

# The asyncio health servicer (grpc_health exposes it as ``health.aio``).
from grpc_health.v1._async import HealthServicer as AsyncHealthServicer
from grpc_reflection.v1alpha import reflection, reflection_pb2
from grpc_reflection.v1alpha._async import ReflectionServicer

from broker.services._handlers import add_servicer

__all__ = ["HEALTH_SERVICE_NAME", "REFLECTION_SERVICE_NAMES", "serve_health",
           "serve_reflection"]

HEALTH_SERVICE_NAME: Final = health_pb2.DESCRIPTOR.services_by_name["Health"].full_name
#: v1 first: what current tools ask for.
REFLECTION_SERVICE_NAMES: Final = ("grpc.reflection.v1.ServerReflection",
                                   reflection.SERVICE_NAME)

_Context = grpc.aio.ServicerContext[Any, Any]


def serve_health(server: grpc.aio.Server) -> AsyncHealthServicer:
    """Serve ``grpc.health.v1.Health``; undecodable requests get INVALID_ARGUMENT."""
    health = AsyncHealthServicer()
    add_servicer(server, health_pb2.DESCRIPTOR.services_by_name["Health"], health)
    return health


def serve_reflection(server: grpc.aio.Server, service_names: Sequence[str]) -> None:
    """Serve reflection v1 and v1alpha, listing ``service_names`` and themselves."""
    servicer = ReflectionServicer((*service_names, *REFLECTION_SERVICE_NAMES))

    async def info(requests: AsyncIterator[Any], context: _Context) -> AsyncIterator[Any]:
        async def decoded() -> AsyncIterator[reflection_pb2.ServerReflectionRequest]:
            async for request in requests:
                if request is None:
                    await context.abort(
                        grpc.StatusCode.INVALID_ARGUMENT,
                        "the request is not a valid ServerReflectionRequest message")
                yield request

        async for response in servicer.ServerReflectionInfo(decoded(), context):
            yield response

    def parse(data: bytes) -> reflection_pb2.ServerReflectionRequest | None:
        try:
            return reflection_pb2.ServerReflectionRequest.FromString(data)
        except DecodeError:
            return None

    handler = grpc.stream_stream_rpc_method_handler(
        info, request_deserializer=parse,
        response_serializer=reflection_pb2.ServerReflectionResponse.SerializeToString)
    server.add_generic_rpc_handlers(tuple(
        grpc.method_handlers_generic_handler(name, {"ServerReflectionInfo": handler})
        for name in REFLECTION_SERVICE_NAMES))
