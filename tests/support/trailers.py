"""The trailing metadata of a failed synchronous gRPC call, as a dict.

grpc-stubs types ``RpcError.trailing_metadata()`` as a tuple of ``_Metadatum``
objects with a ``bytes`` value; at run time the items are plain ``(key, value)``
tuples, and the value of a key without ``-bin`` (every ``folio-error*`` key) is a
``str``. The cast states that, so tests read ``trailers(error)["folio-error"]``.
"""

from __future__ import annotations

from typing import cast

import grpc


def trailers(error: grpc.RpcError) -> dict[str, str]:
    """``dict(error.trailing_metadata() or ())``, typed as what it is at run time."""
    return dict(cast("tuple[tuple[str, str], ...]", error.trailing_metadata() or ()))


def trailing_pairs(error: grpc.RpcError) -> tuple[tuple[str, str | bytes], ...]:
    """``error.trailing_metadata() or ()`` as the (key, value) pairs it is at run time
    (what ``ServicerContext.set_trailing_metadata`` takes, to pass an error on)."""
    return cast("tuple[tuple[str, str | bytes], ...]", error.trailing_metadata() or ())
