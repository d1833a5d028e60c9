"""FindCoordinator (key 10), v0-v4: the broker coordinating a group or a transactional id.

``broker.kafka.locator`` decides (this broker, on a standalone). v4 asks for
several keys at once (KIP-699). Key types other than 0 (group) and 1
(transaction) answer INVALID_REQUEST.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.kafka.access import GROUP_LOOKUP, TXN_PRODUCE, allowed
from broker.kafka.context import KafkaContext
from broker.kafka.dispatch import Api, Call
from broker.kafka.handlers.coordination import ZERO
from broker.kafka.locator import GROUP_KEY, TRANSACTION_KEY, Node
from broker.kafka.messages import build, nested, response_class

__all__ = ["FIND_COORDINATOR_KEY", "ROWS"]

FIND_COORDINATOR_KEY = 10


def _find(context: KafkaContext, call: Call, key_type: int,
          key: str) -> tuple[ErrorCode, Node | None]:
    if key_type not in (GROUP_KEY, TRANSACTION_KEY):
        return ErrorCode.invalid_request, None
    requirement = GROUP_LOOKUP if key_type == GROUP_KEY else TXN_PRODUCE
    if not allowed(context, call, requirement, key):
        return requirement.refused, None
    if context.coordinators is None:
        return ErrorCode.coordinator_not_available, None
    node = (context.locator or context.coordinators.locator).coordinator_of(key_type, key)
    if node is None:
        return ErrorCode.coordinator_not_available, None
    return ErrorCode.none, node


async def handle_find_coordinator(context: KafkaContext, call: Call) -> Any:
    """The coordinator of each key asked."""
    cls = response_class(FIND_COORDINATOR_KEY, call.version)
    request = call.request
    key_type = getattr(request, "key_type", GROUP_KEY)
    if call.version >= 4:
        entry_cls = nested(cls, "Coordinator")
        entries = []
        for key in request.coordinator_keys:
            code, node = _find(context, call, key_type, key)
            entries.append(build(entry_cls, key=key, node_id=node.node_id if node else -1,
                                 host=node.host if node else "", port=node.port if node else -1,
                                 error_code=code, error_message=_message(code)))
        return build(cls, throttle_time=ZERO, coordinators=tuple(entries))
    code, node = _find(context, call, key_type, request.key)
    return build(cls, throttle_time=ZERO, error_code=code, error_message=_message(code),
                 node_id=node.node_id if node else -1, host=node.host if node else "",
                 port=node.port if node else -1)


def _message(code: ErrorCode) -> str | None:
    if code is ErrorCode.invalid_request:
        return "key_type must be 0 (group) or 1 (transaction)"
    return None


ROWS = (Api(FIND_COORDINATOR_KEY, "FindCoordinator", 0, 4, handle_find_coordinator),)
