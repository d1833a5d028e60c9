"""Reader group states in the metadata store, changed only by compare-and-set.

A group is one node, ``/folio/groups/<name>``, holding its serialised
``folio.v1.ReaderGroupState``; the node's version is the state's version.
The broker never interprets the state beyond its format: clients compute each
new state and write it with the version they read (``update``), as with
Pravega's state synchronizer, so two readers never both take a segment.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass
from typing import Final

from google.protobuf.message import DecodeError

from broker.errors import (
    GroupStateConflictError,
    InvalidArgumentError,
    ReaderGroupExistsError,
    ReaderGroupNotFoundError,
)
from broker.metadata_paths import GROUPS_ROOT
from folio.api.v1 import groups_pb2
from ledger.api import MetadataStore
from ledger.errors import BadVersionError, MetadataUnavailableError, NodeExistsError, NoNodeError
from ledger.metadata.read_back import landed

__all__ = [
    "DEFAULT_SESSION_TIMEOUT_MS",
    "GROUPS_ROOT",
    "MAX_SESSION_TIMEOUT_MS",
    "MAX_STATE_BYTES",
    "MIN_SESSION_TIMEOUT_MS",
    "STATE_FORMAT",
    "GroupRecord",
    "ReaderGroupStore",
    "session_timeout_ms",
]

#: The largest serialised state accepted.
MAX_STATE_BYTES: Final = 4 * 1024 * 1024
#: The state format this broker knows (``ReaderGroupState.format``).
STATE_FORMAT: Final = 1
#: ``ReaderGroupState.session_timeout_ms`` 0 means this (as Kafka's 10 s default).
DEFAULT_SESSION_TIMEOUT_MS: Final = 10_000
#: The range a group's session timeout may be set to (Kafka's broker bounds are
#: 6 s to 30 min; 1 s is allowed for tests and latency-sensitive groups).
MIN_SESSION_TIMEOUT_MS: Final = 1_000
MAX_SESSION_TIMEOUT_MS: Final = 1_800_000

_NAME = re.compile(r"[A-Za-z0-9-][A-Za-z0-9._-]{0,248}")


@dataclass(frozen=True, slots=True)
class GroupRecord:
    """A group's name, state and version."""

    name: str
    version: int
    state: groups_pb2.ReaderGroupState


def check_group_name(name: str) -> None:
    """``InvalidArgumentError`` unless ``name`` follows the topic name rules."""
    if _NAME.fullmatch(name) is None:
        raise InvalidArgumentError(
            f"reader group name {name!r} must be 1 to 249 characters of [A-Za-z0-9._-] "
            "not starting with '_' or '.'")


def session_timeout_ms(state: groups_pb2.ReaderGroupState) -> int:
    """The group's session timeout, the default filled in for 0."""
    return state.session_timeout_ms or DEFAULT_SESSION_TIMEOUT_MS


def _encode(name: str, state: groups_pb2.ReaderGroupState) -> bytes:
    if state.format != STATE_FORMAT:
        raise InvalidArgumentError(
            f"reader group {name!r}: state format {state.format} is unknown "
            f"(this broker knows {STATE_FORMAT})")
    if not state.topics:
        raise InvalidArgumentError(f"reader group {name!r}: the state names no topics")
    timeout_ms = state.session_timeout_ms
    if timeout_ms and not MIN_SESSION_TIMEOUT_MS <= timeout_ms <= MAX_SESSION_TIMEOUT_MS:
        raise InvalidArgumentError(
            f"reader group {name!r}: session_timeout_ms must be {MIN_SESSION_TIMEOUT_MS} to "
            f"{MAX_SESSION_TIMEOUT_MS} (0: the default, {DEFAULT_SESSION_TIMEOUT_MS}), "
            f"not {timeout_ms}")
    data = state.SerializeToString()
    if len(data) > MAX_STATE_BYTES:
        raise InvalidArgumentError(
            f"reader group {name!r}: state of {len(data)} bytes exceeds {MAX_STATE_BYTES}")
    return data


def _decode(name: str, data: bytes, version: int) -> GroupRecord:
    state = groups_pb2.ReaderGroupState()
    with contextlib.suppress(DecodeError):  # written by us: decodes
        state.ParseFromString(data)
    return GroupRecord(name, version, state)


class ReaderGroupStore:
    """Create, read, conditionally update and delete reader group states."""

    def __init__(self, store: MetadataStore) -> None:
        self._store = store

    @staticmethod
    def _path(name: str) -> str:
        return f"{GROUPS_ROOT}/{name}"

    async def create(self, name: str, state: groups_pb2.ReaderGroupState) -> GroupRecord:
        """The new group at version 0. ``ReaderGroupExistsError``, ``InvalidArgumentError``."""
        check_group_name(name)
        data = _encode(name, state)
        try:
            await self._store.create(self._path(name), data, make_parents=True)
        except NodeExistsError:
            raise ReaderGroupExistsError(name) from None
        except MetadataUnavailableError:
            # Maybe created: the node holding our bytes at version 0 means it was.
            node = await landed(self._store, self._path(name), data)
            if node is None or node.version != 0:
                raise
        return GroupRecord(name, 0, state)

    async def get(self, name: str) -> GroupRecord:
        """The group. ``ReaderGroupNotFoundError`` (also for a name breaking the rules)."""
        try:
            check_group_name(name)
            node = await self._store.get(self._path(name))
        except (InvalidArgumentError, NoNodeError):
            raise ReaderGroupNotFoundError(name) from None
        return _decode(name, node.data, node.version)

    async def update(self, name: str, expected_version: int,
                     state: groups_pb2.ReaderGroupState) -> GroupRecord:
        """Replace the state if the version is ``expected_version``.

        Raises ``GroupStateConflictError`` (another client changed it first),
        ``ReaderGroupNotFoundError``, ``InvalidArgumentError``.
        """
        check_group_name(name)
        if expected_version < 0:
            raise InvalidArgumentError(
                f"expected_version must be >= 0, not {expected_version}")
        data = _encode(name, state)
        try:
            version = await self._store.set(self._path(name), data, expected_version)
        except NoNodeError:
            raise ReaderGroupNotFoundError(name) from None
        except BadVersionError:
            current = await self.get(name)
            raise GroupStateConflictError(name, expected_version, current.version) from None
        except MetadataUnavailableError:
            # Maybe applied: our bytes at the next version mean it was; otherwise
            # the error stands (retriable: the client reads the group again).
            node = await landed(self._store, self._path(name), data)
            if node is None or node.version != expected_version + 1:
                raise
            version = node.version
        return GroupRecord(name, version, state)

    async def delete(self, name: str) -> None:
        """Delete the group. ``ReaderGroupNotFoundError``."""
        try:
            check_group_name(name)
            await self._store.delete(self._path(name))
        except (InvalidArgumentError, NoNodeError):
            raise ReaderGroupNotFoundError(name) from None

    async def names(self) -> list[str]:
        """Every group's name, ascending."""
        try:
            return sorted(await self._store.children(GROUPS_ROOT))
        except NoNodeError:
            return []
