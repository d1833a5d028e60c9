"""ApiVersions (key 18), v0-v4: the versions of every API in the dispatch table.

v3+ answers carry the broker's features (tagged fields): Folio's one is
``transaction.version`` (KIP-890), supported 0-2 and finalized at 2 where
transactions are served (``broker.kafka.txns.versions``), so clients of
transaction version 2 bump the epoch at each EndTxn (v5) and add partitions
by producing (Produce v12+); on a multi-broker cluster a partition's owner
asks the transaction coordinator to add them (``broker.kafka.txns.cluster``).
v4 only lets a supported
feature start at 0: a v3 answer leaves such features out of
SupportedFeatures, as Kafka does (KAFKA-17492), and keeps the finalized
ones. v3+ requests are flexible (header v2, compact strings) while every
ApiVersions response keeps header v0 so a client can read it whatever it
asked (KIP-511); kio's classes carry that rule. A request of a version above v4 is answered by
``unsupported_version_answer`` in v0 (see the connection).
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from broker.kafka.context import KafkaContext
from broker.kafka.dispatch import Api, Call
from broker.kafka.messages import build, nested, response_class
from broker.kafka.txns.versions import TRANSACTION_VERSION

__all__ = ["API_VERSIONS_KEY", "ROWS", "unsupported_version_answer"]

API_VERSIONS_KEY = 18
_ZERO = datetime.timedelta(0)
#: The epoch of the finalized features (Kafka's metadata offset): they never change here.
_FEATURES_EPOCH = 1


def _answer(context: KafkaContext, version: int, error: ErrorCode) -> Any:
    cls = response_class(API_VERSIONS_KEY, version)
    row = nested(cls, "ApiVersion")
    keys = tuple(build(row, api_key=key, min_version=low, max_version=high)
                 for key, low, high in context.served)
    if version < 3 or not _transaction_version_2(context):
        return build(cls, error_code=error, api_keys=keys, throttle_time=_ZERO)
    supported = () if version < 4 else (build(
        nested(cls, "SupportedFeatureKey"), name="transaction.version", min_version=0,
        max_version=TRANSACTION_VERSION),)
    finalized = (build(nested(cls, "FinalizedFeatureKey"), name="transaction.version",
                       max_version_level=TRANSACTION_VERSION,
                       min_version_level=TRANSACTION_VERSION),)
    return build(cls, error_code=error, api_keys=keys, throttle_time=_ZERO,
                 supported_features=supported, finalized_features_epoch=_FEATURES_EPOCH,
                 finalized_features=finalized)


def _transaction_version_2(context: KafkaContext) -> bool:
    """Whether transaction version 2 is served: Kafka transactions are (module docstring)."""
    return context.transactional_check is not None and context.coordinators is not None


def unsupported_version_answer(context: KafkaContext) -> Any:
    """The v0 answer to an ApiVersions request of a version not served."""
    return _answer(context, 0, ErrorCode.unsupported_version)


async def handle_api_versions(context: KafkaContext, call: Call) -> Any:
    """Every served API and its version range."""
    return _answer(context, call.version, ErrorCode.none)


ROWS = (Api(API_VERSIONS_KEY, "ApiVersions", 0, 4, handle_api_versions),)
