"""Registering servicers so that an undecodable request gets INVALID_ARGUMENT.

The generated ``add_*Servicer_to_server`` functions parse requests with
``FromString``; bytes that are not the request message make gRPC answer
UNKNOWN with a Python exception's text. Here every method's parser answers an
undecodable message with ``UNDECODABLE`` instead, and the call ends with
INVALID_ARGUMENT naming the message type expected (for a request stream: at
the bad message, after the ones before it were handled). Streaming calls are
counted while open (``broker.metrics.open_stream``).

A unary request's names are checked for length (``broker.services.request_names``)
before the servicer sees it. A request stream's are not: on the Append stream
a bad name refuses that one flow (the servicer answers it), not the stream.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc
from google.protobuf.descriptor import MethodDescriptor, ServiceDescriptor
from google.protobuf.message import DecodeError
from google.protobuf.message_factory import GetMessageClass

from broker.errors import InvalidArgumentError
from broker.metrics import count_unexpected, open_stream
from broker.services._servicer import abort_with
from broker.services.request_names import check_request_names

__all__ = ["UNDECODABLE", "add_servicer"]


class _Undecodable:
    """What a request parser returns for bytes that are not the message."""


UNDECODABLE = _Undecodable()

_Context = grpc.aio.ServicerContext[Any, Any]


def _parser(parse: Callable[[bytes], Any]) -> Callable[[bytes], Any]:
    def deserialize(data: bytes) -> Any:
        try:
            return parse(data)
        except DecodeError:
            return UNDECODABLE

    return deserialize


def _serializer(serialize: Callable[[Any], bytes]) -> Callable[[Any], bytes]:
    """``serialize``, but a response already encoded (``bytes``, e.g. a Read response from
    ``broker.services.read_wire``) goes out as it is."""
    def serialized(message: Any) -> bytes:
        return message if type(message) is bytes else serialize(message)

    return serialized


def _complaint(method: MethodDescriptor) -> str:
    return f"the request is not a valid {method.input_type.full_name} message"


async def _check_names(request: Any, context: _Context) -> None:
    try:
        check_request_names(request)
    except InvalidArgumentError as error:
        await abort_with(context, error)


def _unary_request(method: MethodDescriptor, behavior: Any) -> Any:
    if method.server_streaming:
        async def stream_out(request: Any, context: _Context) -> AsyncIterator[Any]:
            if request is UNDECODABLE:
                await abort_with(context, InvalidArgumentError(_complaint(method)))
            await _check_names(request, context)
            with open_stream(method.name, context.peer()):
                async for response in behavior(request, context):
                    yield response
        return stream_out

    async def unary_out(request: Any, context: _Context) -> Any:
        if request is UNDECODABLE:
            await abort_with(context, InvalidArgumentError(_complaint(method)))
        await _check_names(request, context)
        with count_unexpected():
            return await behavior(request, context)
    return unary_out


def _stream_request(method: MethodDescriptor, behavior: Any) -> Any:
    async def checked(requests: AsyncIterator[Any]) -> AsyncIterator[Any]:
        async for request in requests:
            if request is UNDECODABLE:
                raise InvalidArgumentError(_complaint(method))
            yield request

    if method.server_streaming:
        async def stream_out(requests: AsyncIterator[Any], context: _Context) -> AsyncIterator[Any]:
            with open_stream(method.name, context.peer()):
                async for response in behavior(checked(requests), context):
                    yield response
        return stream_out

    async def unary_out(requests: AsyncIterator[Any], context: _Context) -> Any:
        with open_stream(method.name, context.peer()):
            return await behavior(checked(requests), context)
    return unary_out


_FACTORIES = {
    (False, False): grpc.unary_unary_rpc_method_handler,
    (False, True): grpc.unary_stream_rpc_method_handler,
    (True, False): grpc.stream_unary_rpc_method_handler,
    (True, True): grpc.stream_stream_rpc_method_handler,
}


def add_servicer(server: grpc.aio.Server, service: ServiceDescriptor, servicer: object) -> None:
    """Serve ``servicer``'s methods for ``service``, refusing undecodable requests cleanly.

    Request streams are handed to the servicer as async iterators that raise
    ``InvalidArgumentError`` at an undecodable message; the servicer answers
    it like any other ``BrokerError``.
    """
    handlers = {}
    for method in service.methods:
        behavior = getattr(servicer, method.name)
        wrap = _stream_request if method.client_streaming else _unary_request
        factory: Any = _FACTORIES[(method.client_streaming, method.server_streaming)]
        handlers[method.name] = factory(
            wrap(method, behavior),
            request_deserializer=_parser(GetMessageClass(method.input_type).FromString),
            response_serializer=_serializer(GetMessageClass(method.output_type).SerializeToString),
        )
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service.full_name,
                                                                          handlers),))
