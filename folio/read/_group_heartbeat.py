"""A reader group member's heartbeats, sent from the client's IO thread.

The broker declares a member offline once it has not heard from it for the
group's session timeout (groups.proto, "Liveness"), so a member heartbeats
every third of that timeout, from the IO thread: a slow application (a long
time between ``read_next`` calls) is not mistaken for a dead one, as with
Kafka's background heartbeat thread. Each heartbeat carries the member's
*acknowledged* offsets, which the reader sets with :meth:`acknowledge` at the
start of ``read_next`` (as Kafka's auto-commit does in ``poll``: every event
returned by an earlier call counts as processed); if the member dies, its
segments are read again from there, so nothing is skipped.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Final

from folio.api.v1 import groups_pb2
from folio.errors import FolioError, ReaderGroupNotFoundError

if TYPE_CHECKING:
    from folio._transport.io_thread import IoThread

__all__ = ["Heartbeat"]

log = logging.getLogger(__name__)

#: Never heartbeat more often than this, whatever the timeout.
_MIN_INTERVAL_S: Final = 0.1
#: Until the broker says: a third of the default 10 s session timeout.
_FIRST_INTERVAL_S: Final = 10.0 / 3


class Heartbeat:
    """Heartbeats of one member until ``close`` or until the broker says it is not one."""

    def __init__(self, io: IoThread,
                 send: Callable[[groups_pb2.HeartbeatRequest, float],
                                Awaitable[groups_pb2.HeartbeatResponse]],
                 group: str, reader_id: str, session_id: str, session_timeout_ms: int) -> None:
        self._send = send
        self._group = group
        self._reader_id = reader_id
        self._session_id = session_id
        self._interval_s = (max(_MIN_INTERVAL_S, session_timeout_ms / 3000)
                            if session_timeout_ms > 0 else _FIRST_INTERVAL_S)
        self._acknowledged: dict[str, int] = {}
        #: Set once the broker answered that this reader is not a member (any more).
        self.lost = False
        self._task = io.submit(self._run())

    @property
    def interval_s(self) -> float:
        """Seconds between heartbeats (a third of the session timeout)."""
        return self._interval_s

    def acknowledge(self, positions: dict[str, int]) -> None:
        """The events before ``positions`` were processed (reported at the next heartbeat).

        The dict is handed over, not copied: the caller must not change it.
        """
        self._acknowledged = positions  # one reference swap: safe across threads

    async def _run(self) -> None:
        while True:
            request = groups_pb2.HeartbeatRequest(
                name=self._group, reader_id=self._reader_id, session_id=self._session_id,
                positions=[groups_pb2.SegmentOffset(segment=s, offset=o)
                           for s, o in self._acknowledged.items()])
            delay = self._interval_s
            try:
                # To the admin broker, or the next one if it cannot be reached (its
                # broker SIGKILLed): heartbeats must not stop with one broker.
                reply = await self._send(request, self._interval_s)
            except FolioError as error:
                if isinstance(error, ReaderGroupNotFoundError):
                    self.lost = True
                    return
                # A broker away for a moment: try again sooner, so that one lost
                # heartbeat does not use up the session.
                log.info("reader %s of group %s: heartbeat failed (%s)", self._reader_id,
                         self._group, error)
                delay = max(_MIN_INTERVAL_S, self._interval_s / 3)
            else:
                if not reply.member:
                    log.warning("reader %s of group %s is not a member any more (declared "
                                "offline?)", self._reader_id, self._group)
                    self.lost = True
                    return
                if reply.session_timeout_ms > 0:
                    self._interval_s = max(_MIN_INTERVAL_S, reply.session_timeout_ms / 3000)
                    delay = self._interval_s
            await asyncio.sleep(delay)

    def close(self) -> None:
        """Stop heartbeating (the member leaves, or was declared offline)."""
        self._task.cancel()
