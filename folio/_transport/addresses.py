"""Broker addresses and endpoint lists; a stub method made again on another channel.

What ``folio._transport.brokers`` compares and parses, apart so that the
rules are easy to find (and to test): :func:`address_key` says when two
``host:port`` spellings are one broker, :func:`parse_endpoints` reads an
endpoint list, and :func:`rebind` turns a stub method of one channel into the
same method on another (admin failover, WrongHost on a unary call), by
finding it among the channel's stubs rather than by gRPC internals.

**Addresses** are compared by :func:`address_key`: host lower-cased, brackets
dropped, and every loopback spelling (``localhost``, ``127.*``, ``::1``) and
the unspecified ``0.0.0.0``/``::`` a broker bound to every interface may
advertise taken as one host, so ``localhost:7070`` and ``127.0.0.1:7070``
share one pool (it dials the spelling it was made with). Other names are not
resolved (no DNS lookup on the IO thread): a broker advertising another name
than the one in the endpoint list gets a second pool, for its segments' data.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, TypeVar

from folio.errors import InvalidArgumentError

if TYPE_CHECKING:  # annotations only: parsing endpoints (folio.config) loads no gRPC
    from google.protobuf.message import Message
    from grpc import aio

    from folio._transport.io_thread import Connection

__all__ = ["address_key", "parse_endpoints", "rebind", "stub_method_of"]

Req = TypeVar("Req", bound="Message")
Resp = TypeVar("Resp", bound="Message")

_LOOPBACK: Final = frozenset({"localhost", "ip6-localhost", "::1", "0.0.0.0", "::", ""})


def address_key(address: str) -> str:
    """What identifies a broker address: ``loopback:7070`` for ``localhost:7070``, etc."""
    host, _, port = address.strip().rpartition(":")
    host = host.strip("[]").lower()
    if host in _LOOPBACK or host.startswith("127."):
        host = "loopback"
    return f"{host}:{port}"


def parse_endpoints(text: str) -> tuple[str, ...]:
    """The endpoints of a comma-separated list, stripped, in order, without repeats.

    Raises:
        InvalidArgumentError: the list names no endpoint.
    """
    endpoints: list[str] = []
    for raw in text.split(","):
        item = raw.strip()
        if item and address_key(item) not in {address_key(e) for e in endpoints}:
            endpoints.append(item)
    if not endpoints:
        raise InvalidArgumentError(
            f"endpoint {text!r} names no broker (host:port, or a comma-separated list)")
    return tuple(endpoints)


_STUBS: Final = ("admin", "transactions", "groups", "read")


def stub_method_of(method: object, connection: Connection) -> tuple[str, str] | None:
    """``(stub, method name)`` of ``method`` on ``connection``'s stubs, or None."""
    for stub_name in _STUBS:
        stub = getattr(connection, stub_name, None)  # (a closed connection has none)
        if stub is None:
            return None
        for name, value in vars(stub).items():
            if value is method:
                return stub_name, name
    return None


def rebind(method: aio.UnaryUnaryMultiCallable[Req, Resp],
           old: Connection | tuple[str, str] | None,
           new: Connection) -> aio.UnaryUnaryMultiCallable[Req, Resp]:
    """The same stub method on channel ``new`` (``method`` itself if it is not ``old``'s).

    ``old`` may be what ``stub_method_of`` found on it (a channel that may be
    closed meanwhile: a closed ``Connection`` has no stubs left to search).
    """
    found = old if isinstance(old, tuple) or old is None else stub_method_of(method, old)
    if found is None:
        return method
    stub_name, name = found
    rebound: aio.UnaryUnaryMultiCallable[Req, Resp] = getattr(getattr(new, stub_name), name)
    return rebound
