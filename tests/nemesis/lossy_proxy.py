"""A TCP proxy that can let a request through and lose its answer.

``LossyProxy`` is a ``TcpProxy`` (cut, pause, resume, ...) with one more
fault: ``lose_next_answer(min_request_bytes)`` arms it so that once a client
sends a chunk of at least ``min_request_bytes`` on a connection, the
server's next bytes on that connection are not relayed: the proxy resets
both sides instead. The server got the request and answered; the client
sees only a lost connection, so the outcome is unknown to it. A ZooKeeper
ping is 12 bytes and a write is larger, so a threshold of 20 aims the fault
at requests that change something; for a bookie, at adds.
"""

from __future__ import annotations

from typing import Final

from tests.support.proxy import TcpProxy, _Connection, _Side

__all__ = ["LossyProxy"]

_RECV_BYTES: Final = 256 * 1024


class LossyProxy(TcpProxy):
    """``TcpProxy`` plus ``lose_next_answer``; ``lost_answers`` counts the answers lost."""

    def __init__(self, target_host: str, target_port: int) -> None:
        # Loop-thread state: changed only by commands run on the loop thread.
        self._armed_bytes: int | None = None
        self._requested: set[int] = set()  # connections whose request went through
        self.lost_answers = 0
        super().__init__(target_host, target_port)

    def lose_next_answer(self, min_request_bytes: int = 20) -> None:
        """Arm the fault (replacing an armed one); it fires once, on one connection."""
        def arm() -> None:
            self._armed_bytes = min_request_bytes
            self._requested.clear()

        self._command(arm)

    def disarm(self) -> None:
        """Forget an armed fault that has not fired."""
        def disarm() -> None:
            self._armed_bytes = None
            self._requested.clear()

        self._command(disarm)

    def _receive(self, connection: _Connection, side: _Side) -> None:
        other = connection.other(side)
        try:
            data = side.sock.recv(_RECV_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        if not data:
            side.eof = True
            return
        if self._armed_bytes is not None:
            if side is connection.client and len(data) >= self._armed_bytes:
                self._requested.add(id(connection))
            elif side is connection.upstream and id(connection) in self._requested:
                # The request reached the server and this is its answer: lose it.
                self._armed_bytes = None
                self._requested.clear()
                self.lost_answers += 1
                self._abort(connection)
                return
        other.outbox += data
        if not (connection.connecting and other is connection.upstream):
            self._flush(connection, other)
