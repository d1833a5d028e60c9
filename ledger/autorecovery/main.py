"""``folio autorecovery``: an auto-recovery worker in a process of its own.

For clusters that run their bookies with ``--no-auto-recovery`` (BookKeeper
offers both too): the same worker as inside ``folio bookie``, on its own
ZooKeeper session. It checks the cluster is initialised, serves Prometheus
metrics, prints one ready line on stdout and works until SIGTERM or SIGINT.
Its worker id (in the auditor and lock nodes) is ``autorecovery-HOST-PID``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import sys
from collections.abc import Callable

from prometheus_client import start_http_server

from ledger.autorecovery.config import AutoRecoveryConfig, AutoRecoveryListenConfig
from ledger.autorecovery.worker import AutoRecoveryWorker
from ledger.bookie.remote import GrpcBookieClient
from ledger.errors import MetadataError
from ledger.metadata.cluster_config import ClusterConfig
from ledger.metadata.cluster_layout import read_layout

__all__ = ["run_autorecovery"]

log = logging.getLogger(__name__)


def _fail(prog: str, message: str) -> int:
    print(f"{prog}: error: {message}", file=sys.stderr, flush=True)
    return 1


def run_autorecovery(cluster: ClusterConfig, config: AutoRecoveryConfig,
                     listen: AutoRecoveryListenConfig, *, prog: str,
                     announce: Callable[[str, int], str],
                     connect: Callable[[str], GrpcBookieClient] = GrpcBookieClient) -> int:
    """Run the worker until SIGTERM or SIGINT; 0 after a clean stop, 1 on a failure.

    ``announce(worker_id, metrics_port)`` builds the ready line; ``connect``
    makes its clients of the bookies (``BookieSecurity.connector`` in a
    secured cluster).
    """
    return asyncio.run(_run(cluster, config, listen, prog, announce, connect))


async def _run(cluster: ClusterConfig, config: AutoRecoveryConfig,
               listen: AutoRecoveryListenConfig, prog: str,
               announce: Callable[[str, int], str],
               connect: Callable[[str], GrpcBookieClient]) -> int:
    try:
        # Imported here: kazoo (the `cluster` extra) is needed only in a cluster.
        from ledger.metadata.zookeeper_store import ZooKeeperMetadataStore  # noqa: PLC0415
    except ImportError as error:
        return _fail(prog, f"needs the ZooKeeper client kazoo ({error}): "
                           "pip install 'folio[cluster]'")
    try:
        store = await ZooKeeperMetadataStore.connect(
            cluster.url(), session_timeout_ms=cluster.metadata_session_timeout_ms)
    except MetadataError as error:
        return _fail(prog, str(error))
    try:
        try:
            await read_layout(store)
        except MetadataError as error:
            return _fail(prog, str(error))
        try:
            metrics, _thread = start_http_server(listen.metrics_port, addr=listen.host)
        except OSError as error:
            return _fail(prog, f"cannot serve metrics on {listen.host}:{listen.metrics_port}: "
                               f"{error}")
        worker_id = f"autorecovery-{socket.gethostname()}-{os.getpid()}"
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        worker = asyncio.create_task(AutoRecoveryWorker(
            store, worker_id, connect=connect, config=config).run())
        try:
            print(announce(worker_id, metrics.server_port), flush=True)
            await stop.wait()
        finally:
            for signum in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(signum)
            worker.cancel()
            try:
                await worker
            except asyncio.CancelledError:
                pass
            except Exception:  # a bug ended it: still stop cleanly
                log.exception("the auto-recovery worker failed")
            metrics.shutdown()
    finally:
        await store.close()
    log.info("auto-recovery worker stopped")
    return 0
