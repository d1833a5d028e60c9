"""The length rules of names in requests, checked before a request reaches a servicer.

Every name a request carries (topic, segment, reader group, reader, writer,
transaction label, commit key) has a documented maximum length. Checking it
at the edge, from the message descriptors, means no RPC can forget it: a
20,000-character topic name is refused with INVALID_ARGUMENT naming the rule
("topic name must be 1 to 249 characters, got 20000") whichever RPC carried
it, before any lookup or error message could echo it. The finer rules
(allowed characters, an empty name) stay with the domain, which knows them.

The check walks only the fields that can hold a name, planned once per
message type; repeated sub-messages are walked only where they hold names
(segments of a reader group's state, never the events of a Produce).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any, Final

from google.protobuf.descriptor import Descriptor, FieldDescriptor

from broker.errors import InvalidArgumentError, TopicNameError
from broker.segments.names import MAX_SEGMENT_NAME_CHARS, MAX_TOPIC_NAME_CHARS

__all__ = ["MAX_NAME_CHARS", "MAX_SEGMENT_NAME_CHARS", "check_request_names"]

#: Reader group, reader, checkpoint names and transaction labels.
MAX_NAME_CHARS: Final = 256
#: ``broker.txn.commit_keys.MAX_COMMIT_KEY_BYTES`` (not imported: it would pull the topics in).
_MAX_COMMIT_KEY_BYTES: Final = 256


@dataclass(frozen=True, slots=True)
class _Rule:
    what: str
    max_chars: int
    error: Callable[[str], InvalidArgumentError] = InvalidArgumentError
    #: For limits in bytes of UTF-8, checked exactly by the domain: refuse
    #: here only what cannot fit (4 bytes a character at most).
    max_bytes: int | None = None

    def check(self, value: str) -> None:
        if len(value) <= self.max_chars:
            return
        if self.max_bytes is not None:
            raise self.error(f"{self.what} must be at most {self.max_bytes} bytes of UTF-8, "
                             f"got {len(value)} characters")
        raise self.error(f"{self.what} must be 1 to {self.max_chars} characters, got {len(value)}")


def _utf8(what: str, max_bytes: int) -> _Rule:
    return _Rule(what, 4 * max_bytes, max_bytes=max_bytes)


_TOPIC = _Rule("topic name", MAX_TOPIC_NAME_CHARS, TopicNameError)
_SEGMENT = _Rule("segment name", MAX_SEGMENT_NAME_CHARS)
_GROUP = _Rule("reader group name", MAX_NAME_CHARS)
_READER = _Rule("reader id", MAX_NAME_CHARS)

#: Rules by field name, for every public request message (and the messages nested in them).
_BY_FIELD: Final[dict[str, _Rule]] = {
    "topic": _TOPIC,
    "topics": _TOPIC,
    "segment": _SEGMENT,
    "segments": _SEGMENT,
    "seal": _SEGMENT,
    "predecessors": _SEGMENT,
    "successors": _SEGMENT,
    "finished": _SEGMENT,
    "waiting_for": _SEGMENT,
    "group": _GROUP,
    "reader_id": _READER,
    "waiting_readers": _READER,
    "label": _utf8("transaction label", MAX_NAME_CHARS),
    "commit_key": _utf8("commit key", _MAX_COMMIT_KEY_BYTES),
}


def _name_rule(message: Descriptor) -> _Rule | None:
    # ``name`` means a different thing in each file: say which in the refusal.
    if message.name == "Checkpoint":
        return _Rule("checkpoint name", MAX_NAME_CHARS)
    if message.file.name.endswith("groups.proto"):
        return _GROUP
    if message.file.name.endswith("admin.proto"):
        return _TOPIC
    return None


@dataclass(frozen=True, slots=True)
class _Plan:
    names: tuple[tuple[FieldDescriptor, _Rule], ...]
    nested: tuple[tuple[FieldDescriptor, _Plan], ...]


@cache
def _plan(message: Descriptor) -> _Plan | None:
    names: list[tuple[FieldDescriptor, _Rule]] = []
    nested: list[tuple[FieldDescriptor, _Plan]] = []
    for field in message.fields:
        if field.type == FieldDescriptor.TYPE_STRING:
            rule = _name_rule(message) if field.name == "name" else _BY_FIELD.get(field.name)
            if rule is not None:
                names.append((field, rule))
        elif (field.type == FieldDescriptor.TYPE_MESSAGE and field.message_type is not None
              and field.message_type is not message
              and not field.message_type.GetOptions().map_entry):
            sub = _plan(field.message_type)
            if sub is not None:
                nested.append((field, sub))
    if not names and not nested:
        return None
    return _Plan(tuple(names), tuple(nested))


def _is_repeated(field: FieldDescriptor) -> bool:
    return bool(field.is_repeated)


def _walk(message: Any, plan: _Plan) -> None:
    for field, rule in plan.names:
        value = getattr(message, field.name)
        if _is_repeated(field):
            for item in value:
                rule.check(item)
        else:
            rule.check(value)
    for field, sub in plan.nested:
        if _is_repeated(field):
            for item in getattr(message, field.name):
                _walk(item, sub)
        elif message.HasField(field.name):
            _walk(getattr(message, field.name), sub)


def check_request_names(message: Any) -> None:
    """Raise ``InvalidArgumentError`` (``TopicNameError`` for topics) at a name too long.

    Args:
        message: a decoded request message of a public service.
    """
    plan = _plan(message.DESCRIPTOR)
    if plan is not None:
        _walk(message, plan)
