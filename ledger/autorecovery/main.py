"""``folio autorecovery``: an auto-recovery worker in a process of its own.

For clusters that run their bookies with ``--no-auto-recovery`` (BookKeeper
offers both too): the same worker as inside ``folio bookie``, on its own
metadata session (``ledger.metadata.stores.open_store``). It checks the
cluster is initialised, serves Prometheus metrics, prints one ready line on
stdout and works until SIGTERM or SIGINT (a ``ledger.lifecycle`` stack: the
session, the metrics server, the worker).
Its worker id (in the auditor and lock nodes) is ``autorecovery-HOST-PID``.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable

from ledger.api import MetadataStore
from ledger.autorecovery.config import AutoRecoveryConfig, AutoRecoveryListenConfig
from ledger.autorecovery.worker import AutoRecoveryWorker
from ledger.bookie.remote import GrpcBookieClient
from ledger.components import Background, MetricsServer
from ledger.errors import MetadataError
from ledger.lifecycle import ComponentStack, StartError, run_process
from ledger.metadata.cluster_config import ClusterConfig
from ledger.metadata.cluster_layout import read_ledger_layout
from ledger.metadata.stores import open_store

__all__ = ["run_autorecovery"]

log = logging.getLogger(__name__)


def run_autorecovery(cluster: ClusterConfig, config: AutoRecoveryConfig,
                     listen: AutoRecoveryListenConfig, *, prog: str,
                     announce: Callable[[str, int], str],
                     connect: Callable[[str], GrpcBookieClient] = GrpcBookieClient) -> int:
    """Run the worker until SIGTERM or SIGINT; 0 after a clean stop, 1 on a failure.

    ``announce(worker_id, metrics_port)`` builds the ready line; ``connect``
    makes its clients of the bookies (``BookieSecurity.connector`` in a
    secured cluster).
    """
    worker_id = f"autorecovery-{socket.gethostname()}-{os.getpid()}"
    stack = ComponentStack(prog)
    session = stack.add(_Session(cluster))
    metrics = stack.add(MetricsServer(listen.host, listen.metrics_port))

    async def work() -> None:
        await AutoRecoveryWorker(session.store, worker_id, connect=connect,
                                 config=config).run()

    stack.add(Background("the auto-recovery worker", work))
    return run_process(prog, lambda: stack, lambda: announce(worker_id, metrics.port))


class _Session:
    """The worker's own metadata session (ZooKeeper's), on an initialised cluster."""

    name = "metadata session"

    def __init__(self, cluster: ClusterConfig) -> None:
        self._cluster = cluster
        self._store: MetadataStore | None = None

    @property
    def store(self) -> MetadataStore:
        if self._store is None:
            raise RuntimeError("not connected")
        return self._store

    async def start(self) -> None:
        try:
            # zk:// without kazoo installed: a MetadataError saying to install it.
            store = await open_store(
                self._cluster.url(), session_timeout_ms=self._cluster.metadata_session_timeout_ms)
        except MetadataError as error:
            raise StartError(str(error)) from None
        try:
            await read_ledger_layout(store)
        except MetadataError as error:
            await store.close()
            raise StartError(str(error)) from None
        self._store = store

    async def stop(self) -> None:
        await self.store.close()
