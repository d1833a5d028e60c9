"""``SetupRetries``: when a flow refused for a transient reason sets up again (``folio._flow``).

A retriable refusal (the ledger service, a broker shutting down, any
UNAVAILABLE) puts the flow in RESETTING; it sets up again after a backoff
(50 ms doubling to 2 s, ``Backoff``) that an acknowledgement starts over.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from folio._transport.append_stream import Backoff
from folio.errors import FolioError

__all__ = ["SetupRetries"]


class SetupRetries:
    """One flow's backoff between setups after transient refusals (its own state)."""

    __slots__ = ("_backoff", "_log", "_message")

    def __init__(self, log: logging.Logger, kind: str) -> None:
        self._log = log
        self._message = kind + " to %s failed (%s); setting up again in %.2f s"
        self._backoff: Backoff | None = None  # made by the first retry

    def reset(self) -> None:
        """An acknowledgement came: the next retry waits the shortest delay again."""
        if self._backoff is not None:
            self._backoff.reset()

    def schedule(self, segment: str, error: FolioError, retry: Callable[[], None]) -> None:
        """Calls ``retry`` on the running loop after the next delay, logging why."""
        backoff = self._backoff
        if backoff is None:
            backoff = self._backoff = Backoff()
        delay = backoff.next_delay()
        self._log.info(self._message, segment, error, delay)
        asyncio.get_running_loop().call_later(delay, retry)
