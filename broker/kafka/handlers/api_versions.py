"""ApiVersions (key 18), v0-v4: the versions of every API in the dispatch table.

v4 has v3's fields (it only lets a broker's supported features start at
version 0; Folio lists no features). v3+ requests are flexible (header v2,
compact strings) while every ApiVersions response keeps header v0 so a
client can read it whatever it asked (KIP-511); kio's classes carry that
rule. A request of a version above v4 is answered by
``unsupported_version_answer`` in v0 (see the connection).
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from broker.kafka.context import KafkaContext
from broker.kafka.dispatch import Api, Call
from broker.kafka.messages import build, nested, response_class

__all__ = ["API_VERSIONS_KEY", "ROWS", "unsupported_version_answer"]

API_VERSIONS_KEY = 18
_ZERO = datetime.timedelta(0)


def _answer(context: KafkaContext, version: int, error: ErrorCode) -> Any:
    cls = response_class(API_VERSIONS_KEY, version)
    row = nested(cls, "ApiVersion")
    keys = tuple(build(row, api_key=key, min_version=low, max_version=high)
                 for key, low, high in context.served)
    return build(cls, error_code=error, api_keys=keys, throttle_time=_ZERO)


def unsupported_version_answer(context: KafkaContext) -> Any:
    """The v0 answer to an ApiVersions request of a version not served."""
    return _answer(context, 0, ErrorCode.unsupported_version)


async def handle_api_versions(context: KafkaContext, call: Call) -> Any:
    """Every served API and its version range."""
    return _answer(context, call.version, ErrorCode.none)


ROWS = (Api(API_VERSIONS_KEY, "ApiVersions", 0, 4, handle_api_versions),)
