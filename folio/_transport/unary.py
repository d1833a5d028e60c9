"""The shape of a blocking unary call: what writers and readers are handed to make one.

``folio.Client._call`` is one: it runs the call (``AdminCore._call``) on the client's IO
thread, tries read-only calls again on UNAVAILABLE, and raises the typed
``FolioError`` the broker answered.
"""

from __future__ import annotations

from typing import Protocol, TypeVar

from google.protobuf.message import Message
from grpc import aio

__all__ = ["UnaryCaller"]

Req = TypeVar("Req", bound=Message)
Resp = TypeVar("Resp", bound=Message)


class UnaryCaller(Protocol):
    """Runs one unary call on the client's IO thread and returns its answer (``Client._call``)."""

    def __call__(self, method: aio.UnaryUnaryMultiCallable[Req, Resp], request: Req, *,
                 retry: bool = False) -> Resp:
        """The call's answer, or its typed ``FolioError``."""
