"""The ``ReaderGroups`` calls of one client, and the compare-and-set loop on a group's state.

The writes reconcile an unknown outcome (``folio._unknown``: a lost answer,
``DEADLINE_EXCEEDED``, the client's own wait) instead of raising at once:
``CreateReaderGroup`` is made again, and ``ReaderGroupExistsError`` after an
unknown outcome is our create when the group holds the state we sent;
``DeleteReaderGroup`` is made again, and ``ReaderGroupNotFoundError`` after an
unknown outcome means deleted; an ``UpdateReaderGroup`` (``cas``) whose
outcome is unknown is read back: the state we wrote means done, the version we
read means not applied (made again with the same expected version, so it can
never apply twice), anything else means another client changed the group
meanwhile, so whether ours is in it cannot be told (``OutcomeUnknownError``:
applying the change again, e.g. a join, could do it twice).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final, TypeVar

from folio._unknown import DEFAULT_SETTLE_TIMEOUT_S, settle_async
from folio.api.v1 import groups_pb2
from folio.errors import (
    GroupStateConflictError,
    OutcomeUnknownError,
    ReaderGroupExistsError,
    ReaderGroupNotFoundError,
)
from folio.read._group_state import GroupState

if TYPE_CHECKING:
    from folio._transport.io_thread import IoThread
    from folio._transport.pool import ReadChannels
    from folio.api.v1.groups_pb2_grpc import ReaderGroupsAsyncStub
    from folio.read.catalog import SegmentCatalog

__all__ = ["_GroupClient"]

R = TypeVar("R")

_CAS_ATTEMPTS: Final = 200


class _GroupClient:
    """The ``ReaderGroups`` calls of one client, blocking and async."""

    def __init__(self, client: SegmentCatalog, call: Callable[..., Any],
                 unary: Callable[..., Awaitable[Any]], io: IoThread,
                 channels: ReadChannels, stub: Callable[[], ReaderGroupsAsyncStub],
                 heartbeat: Callable[[groups_pb2.HeartbeatRequest, float],
                                     Awaitable[groups_pb2.HeartbeatResponse]]) -> None:
        self.client = client
        self.call = call
        self.unary = unary
        self.io = io
        self.channels = channels
        self._stub = stub
        #: ``heartbeat(request, timeout_s)``: one heartbeat, failing over to
        #: another broker when the admin broker cannot be reached.
        self.heartbeat = heartbeat

    @property
    def stub(self) -> ReaderGroupsAsyncStub:
        """The admin broker's stub now: it changes at bootstrap and on failover, and a
        pool left behind is closed (its stubs would fail "Channel is closed")."""
        return self._stub()

    def get(self, name: str) -> tuple[int, GroupState]:
        return self.io.run(self.get_async(name))

    async def get_async(self, name: str) -> tuple[int, GroupState]:
        """The group's version and state (``ReaderGroupNotFoundError``)."""
        reply = await self.unary(self.stub.GetReaderGroup,
                                 groups_pb2.GetReaderGroupRequest(name=name), retry=True)
        return reply.version, GroupState.from_proto(name, reply.state)

    def create(self, request: groups_pb2.CreateReaderGroupRequest) -> None:
        self.io.run(self.create_async(request))

    async def create_async(self, request: groups_pb2.CreateReaderGroupRequest) -> None:
        """``CreateReaderGroup``; ``ReaderGroupExistsError`` unless an earlier attempt made it."""
        async def attempt(after_unknown: bool) -> None:
            try:
                await self.unary(self.stub.CreateReaderGroup, request)
            except ReaderGroupExistsError:
                if not after_unknown or \
                        (await self.get_async(request.name))[1] != \
                        GroupState.from_proto(request.name, request.state):
                    raise
        await settle_async(f"CreateReaderGroup {request.name}", attempt)

    def delete(self, name: str) -> None:
        self.io.run(self.delete_async(name))

    async def delete_async(self, name: str) -> None:
        """``DeleteReaderGroup``; ``ReaderGroupNotFoundError`` unless an earlier attempt
        deleted it."""
        async def attempt(after_unknown: bool) -> None:
            try:
                await self.unary(self.stub.DeleteReaderGroup,
                                 groups_pb2.DeleteReaderGroupRequest(name=name))
            except ReaderGroupNotFoundError:
                if not after_unknown:
                    raise
        await settle_async(f"DeleteReaderGroup {name}", attempt)

    def cas(self, name: str, change: Callable[[GroupState], R], *,
            settle_s: float = DEFAULT_SETTLE_TIMEOUT_S) -> R:
        """``cas_async`` on the IO thread (``change`` runs there)."""
        return self.io.run(self.cas_async(name, change, settle_s=settle_s))

    async def cas_async(self, name: str, change: Callable[[GroupState], R], *,
                        settle_s: float = DEFAULT_SETTLE_TIMEOUT_S) -> R:
        """Apply ``change`` to the latest state and write it back by compare-and-set.

        An update whose outcome is unknown is reconciled for ``settle_s``
        (``_update``); 0: one attempt, then ``OutcomeUnknownError``, for a
        caller that reconciles by itself (``GroupReader``'s sync reads what the
        state says it holds at its next sync, and keeps reading meanwhile).
        """
        for _ in range(_CAS_ATTEMPTS):
            version, state = await self.get_async(name)
            changed = state.copy()
            result = change(changed)
            if changed == state:
                return result
            request = groups_pb2.UpdateReaderGroupRequest(
                name=name, expected_version=version, state=changed.to_proto())
            try:
                await settle_async(f"UpdateReaderGroup {name}",
                                   functools.partial(self._update, request, changed),
                                   timeout_s=settle_s)
            except GroupStateConflictError:
                continue
            return result
        raise GroupStateConflictError(f"reader group {name!r} kept changing; gave up after "
                                      f"{_CAS_ATTEMPTS} attempts")

    async def _update(self, request: groups_pb2.UpdateReaderGroupRequest, changed: GroupState,
                      after_unknown: bool) -> None:
        """One ``UpdateReaderGroup`` attempt; after an unknown outcome, read back first."""
        if after_unknown:
            # Crash window: the update applied, its answer lost. The group
            # shows it (done), or is at the version we read (not applied:
            # made again, the same expected version so at most once), or
            # another client moved it on: ours may be under theirs.
            version, now = await self.get_async(request.name)
            if now == changed:
                return
            if version != request.expected_version:
                raise OutcomeUnknownError(
                    f"UpdateReaderGroup {request.name}: its outcome was unknown and the "
                    f"group changed since (version {request.expected_version} -> "
                    f"{version}); whether the change is in it cannot be told: read the "
                    f"group (describe) before trying again",
                    operation=f"UpdateReaderGroup {request.name}")
        await self.unary(self.stub.UpdateReaderGroup, request)
