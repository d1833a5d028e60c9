"""What every broker servicer shares: ending a call with the status of a domain error."""

from __future__ import annotations

from typing import Any, NoReturn

import grpc

from broker.metrics import observe_error_code
from broker.status import status_for, trailing_metadata_for

__all__ = ["abort_with"]


async def abort_with(context: grpc.aio.ServicerContext[Any, Any], error: BaseException) -> NoReturn:
    """End the call with ``error``'s status code, message and typed metadata."""
    code, message = status_for(error)
    observe_error_code(code)
    context.set_trailing_metadata(trailing_metadata_for(error))
    await context.abort(code, message)
    raise AssertionError("unreachable: abort raises")  # pragma: no cover
