"""Components every server process has: a Prometheus endpoint and background work.

Parts of a ``ledger.lifecycle.ComponentStack``:

- ``MetricsServer``: ``/metrics`` over HTTP(S) (``prometheus_client``'s
  server thread), started and shut down with the stack;
- ``Background``: long-running coroutines (the auto-recovery worker...) in one
  ``asyncio.TaskGroup`` owned by the component: started with it, cancelled
  and waited for when it stops, so nothing outlives its owner. One that ends
  by itself with an error is logged at once; the others go on.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Callable, Coroutine
from typing import Any

from prometheus_client import start_http_server

from ledger.lifecycle import StartError

__all__ = ["Background", "MetricsServer"]

log = logging.getLogger(__name__)

Work = Callable[[], Coroutine[Any, Any, None]]
"""Makes one coroutine of background work (runs until cancelled)."""


class MetricsServer:
    """Prometheus ``/metrics`` on ``host:port`` (0: any free port); ``port`` once started.

    ``tls``: makes the keyword arguments of ``start_http_server`` for HTTPS
    (``ledger.security.tls.metrics_tls_arguments``), called at start; None:
    plain HTTP.
    """

    name = "metrics server"

    def __init__(self, host: str, port: int,
                 tls: Callable[[], dict[str, Any]] | None = None) -> None:
        self._host = host
        self._requested = port
        self._tls = tls
        self._server: Any = None

    @property
    def port(self) -> int:
        """The bound port."""
        if self._server is None:
            raise RuntimeError("MetricsServer.start first")
        return int(self._server.server_port)

    async def start(self) -> None:
        arguments = {} if self._tls is None else self._tls()
        try:
            self._server, _thread = start_http_server(self._requested, addr=self._host,
                                                      **arguments)
        except (OSError, ssl.SSLError) as error:
            raise StartError(f"cannot serve metrics on {self._host}:{self._requested}: "
                             f"{error}") from None

    async def stop(self) -> None:
        self._server.shutdown()


class Background:
    """Coroutines run in one ``asyncio.TaskGroup`` from ``start`` to ``stop``.

    Args:
        name: what the logs call it.
        work: each makes one coroutine; it runs until cancelled.
    """

    def __init__(self, name: str, *work: Work) -> None:
        self.name = name
        self._work = work
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=self.name)
        self._task.add_done_callback(self._ended)

    async def _run(self) -> None:
        async with asyncio.TaskGroup() as group:
            for make in self._work:
                group.create_task(self._logged(make))

    async def _logged(self, make: Work) -> None:
        try:
            await make()
        except Exception:  # a bug ended it: logged now, the process goes on serving
            log.exception("%s failed", self.name)

    def _ended(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            log.error("%s ended", self.name, exc_info=task.exception())

    async def stop(self) -> None:
        """Cancel the work and wait for it to end (its ``finally`` blocks run)."""
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        # Waited for, not awaited: its cancellation is its own, not raised here.
        await asyncio.wait({task})
