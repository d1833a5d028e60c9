"""Share sessions (KIP-932, like KIP-227's fetch sessions): which partitions a member fetches.

One session per (group, member). A ShareFetch at epoch 0 opens it (a new
session replaces an older one), later requests carry the next epoch (it
wraps from 2^31-1 to 1) and add the partitions they list or forget those in
``forgotten_topics_data``; epoch -1 closes it. A request at another epoch
gets INVALID_SHARE_SESSION_EPOCH, one of a member without a session
SHARE_SESSION_NOT_FOUND. ShareAcknowledge cannot open a session (epoch 0 is
INVALID_SHARE_SESSION_EPOCH) but advances or closes one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

__all__ = ["CLOSE_EPOCH", "SessionKey", "ShareSession", "ShareSessions"]

CLOSE_EPOCH = -1
_MAX_EPOCH = 2**31 - 1
#: (topic name, partition).
SessionKey = tuple[str, int]


@dataclass
class ShareSession:
    """A member's share session: the epoch its next request carries, its partitions."""

    epoch: int = 1
    partitions: set[SessionKey] = field(default_factory=set)


class ShareSessions:
    """The share sessions by (group, member) (module docstring)."""

    def __init__(self) -> None:
        self._sessions: dict[tuple[str, str], ShareSession] = {}

    def advance(self, group_id: str, member_id: str, epoch: int, listed: Iterable[SessionKey],
                forgotten: Iterable[SessionKey], *, may_open: bool,
                ) -> tuple[ErrorCode, ShareSession | None]:
        """The session a request at ``epoch`` works on (epoch -1: removed, returned last)."""
        key = (group_id, member_id)
        if epoch == 0:
            if not may_open:
                return ErrorCode.invalid_share_session_epoch, None
            opened = self._sessions[key] = ShareSession(1, set(listed))
            return ErrorCode.none, opened
        session = self._sessions.get(key)
        if session is None:
            return ErrorCode.share_session_not_found, None
        if epoch == CLOSE_EPOCH:
            del self._sessions[key]
            return ErrorCode.none, session
        if epoch != session.epoch:
            return ErrorCode.invalid_share_session_epoch, None
        session.epoch = 1 if session.epoch >= _MAX_EPOCH else session.epoch + 1
        session.partitions.update(listed)
        session.partitions.difference_update(forgotten)
        return ErrorCode.none, session

    def drop_member(self, group_id: str, member_id: str) -> None:
        """The member left the group: its session goes."""
        self._sessions.pop((group_id, member_id), None)
