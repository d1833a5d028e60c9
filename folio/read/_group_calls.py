"""The ``ReaderGroups`` calls of one client, and the compare-and-set loop on a group's state."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final, TypeVar

from folio.api.v1 import groups_pb2
from folio.errors import GroupStateConflictError
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
        reply = self.call(self.stub.GetReaderGroup, groups_pb2.GetReaderGroupRequest(name=name),
                          retry=True)
        return reply.version, GroupState.from_proto(name, reply.state)

    def cas(self, name: str, change: Callable[[GroupState], R]) -> R:
        """Apply ``change`` to the latest state and write it back by compare-and-set."""
        for _ in range(_CAS_ATTEMPTS):
            version, state = self.get(name)
            changed = state.copy()
            result = change(changed)
            if changed == state:
                return result
            request = groups_pb2.UpdateReaderGroupRequest(
                name=name, expected_version=version, state=changed.to_proto())
            try:
                self.call(self.stub.UpdateReaderGroup, request)
            except GroupStateConflictError:
                continue
            return result
        raise GroupStateConflictError(f"reader group {name!r} kept changing; gave up after "
                                      f"{_CAS_ATTEMPTS} attempts")
