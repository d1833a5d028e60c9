"""Run a bookie process: open the store, serve it over gRPC, stop on a signal.

Used by ``folio bookie``
(``ledger.cli`` parses their options). The process announces itself with one
line on stdout once it accepts RPCs, which is how scripts and tests learn the
port it bound when asked for port 0; everything else goes to the log (stderr).
It also serves Prometheus metrics (``ledger.metrics``) on ``/metrics`` of its
metrics port.

Shutdown order matters: the server stops first (in-flight RPCs get a grace
period to finish, which includes waiting for their group commit), and only
then is the storage closed, so no acknowledged add is cut short. A SIGKILL
skips all of it, which is fine: an add is acknowledged only once durable.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from prometheus_client import start_http_server

from ledger.bookie.bookie import Bookie
from ledger.bookie.service import start_bookie_server
from ledger.config import BookieConfig
from ledger.errors import MetadataError, StorageError
from ledger.metadata.cluster_config import ClusterConfig

if TYPE_CHECKING:
    from ledger.bookie.membership import BookieMembership

__all__ = ["STOP_GRACE_S", "run_bookie"]

log = logging.getLogger(__name__)

#: Seconds in-flight RPCs get to finish when the process is asked to stop.
STOP_GRACE_S = 5.0

Announce = Callable[[int, int | None], str]
"""Builds the ready line from the bound port and the bound metrics port (None: none)."""


def _fail(prog: str, message: str) -> int:
    print(f"{prog}: error: {message}", file=sys.stderr, flush=True)
    return 1


def run_bookie(config: BookieConfig, host: str, port: int, *, prog: str,
               announce: Announce, metrics_port: int | None = None,
               cluster: ClusterConfig | None = None) -> int:
    """Serve one bookie until SIGTERM or SIGINT; return the process exit code.

    Args:
        config: the bookie's configuration; its data dir is created if missing.
        host: address to listen on.
        port: port to listen on, 0 for any free one.
        prog: command name for error messages (``folio bookie``).
        announce: the line printed to stdout (and flushed) once serving.
        metrics_port: port of Prometheus ``/metrics`` on ``host``, 0 for any
            free one; None serves no metrics.
        cluster: with a metadata URL, join that cluster: refuse to start if
            it is not initialised, register once serving (``membership``).

    Returns:
        0 after a clean stop; 1, with one line on stderr and no traceback, if
        the data dir cannot be opened (e.g. another bookie holds it) or the
        address cannot be bound.
    """
    try:
        os.makedirs(config.data_dir, exist_ok=True)
    except OSError as error:
        return _fail(prog, f"cannot create data dir {config.data_dir}: {error}")
    return asyncio.run(_serve(config, host, port, prog, announce, metrics_port, cluster))


async def _serve(config: BookieConfig, host: str, port: int, prog: str,
                 announce: Announce, metrics_port: int | None,
                 cluster: ClusterConfig | None) -> int:
    membership: BookieMembership | None = None
    if cluster is not None and cluster.enabled:
        try:
            # Imported here: kazoo (the `cluster` extra) is needed only in a cluster.
            from ledger.bookie.membership import BookieMembership  # noqa: PLC0415
        except ImportError as error:
            return _fail(prog, f"--metadata-url needs the ZooKeeper client kazoo ({error}): "
                               "pip install 'folio[cluster]'")
        try:
            membership = await BookieMembership.connect(cluster)
        except MetadataError as error:
            return _fail(prog, str(error))
    try:
        return await _serve_bookie(config, host, port, prog, announce, metrics_port, membership)
    finally:
        if membership is not None:
            await membership.close()


async def _serve_bookie(config: BookieConfig, host: str, port: int, prog: str,
                        announce: Announce, metrics_port: int | None,
                        membership: BookieMembership | None) -> int:
    try:
        bookie = Bookie(config, bookie_id=f"{host}:{port}")
    except StorageError as error:
        hint = ""
        if "lock" in str(error).lower():
            hint = " (is another bookie running on this data dir?)"
        return _fail(prog, f"{error}{hint}")
    try:
        try:
            server, bound = await start_bookie_server(bookie, host, port)
        except OSError as error:
            return _fail(prog, str(error))
        metrics = None
        if metrics_port is not None:
            try:
                metrics, _thread = start_http_server(metrics_port, addr=host)
            except OSError as error:
                await server.stop(0)
                return _fail(prog, f"cannot serve metrics on {host}:{metrics_port}: {error}")
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        try:
            if membership is not None:
                try:
                    await membership.register(host, bound)
                except MetadataError as error:
                    return _fail(prog, f"cannot register in the cluster: {error}")
            print(announce(bound, None if metrics is None else metrics.server_port), flush=True)
            await stop.wait()
            if membership is not None:
                # Unregistered first: brokers place no new ledgers here while it stops.
                await membership.close()
            log.info("stopping: no new RPCs, %.0f s for those in flight", STOP_GRACE_S)
        finally:
            for signum in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(signum)
            await server.stop(STOP_GRACE_S)
            if metrics is not None:
                metrics.shutdown()
    finally:
        # Inside the loop, so that completions of adds still queued (from RPCs
        # cancelled by the stop) land on a live loop rather than a closed one.
        bookie.shutdown()
    log.info("bookie stopped")
    return 0
