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
import ssl
import sys
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

import grpc
from prometheus_client import start_http_server

from ledger.api import MetadataStore
from ledger.bookie.bookie import Bookie
from ledger.bookie.service import start_bookie_server
from ledger.config import BookieConfig, BookieListenConfig
from ledger.errors import MetadataError, StorageError
from ledger.metadata.cluster_config import ClusterConfig
from ledger.security.interceptor import AuthInterceptor
from ledger.security.tls import TlsConfigError, metrics_tls_arguments
from ledger.security.tokens import TokenVerifier
from ledger.stack_dump import install_stack_dump

if TYPE_CHECKING:
    from ledger.bookie.membership import BookieMembership

__all__ = ["STOP_GRACE_S", "ClusterService", "run_bookie"]

log = logging.getLogger(__name__)

#: Seconds in-flight RPCs get to finish when the process is asked to stop.
STOP_GRACE_S = 5.0

Announce = Callable[[int, int | None], str]
"""Builds the ready line from the bound port and the bound metrics port (None: none)."""

ClusterService = Callable[[MetadataStore, str], Coroutine[Any, Any, None]]
"""Work a cluster bookie runs beside serving, given the cluster's store and its own id
(the auto-recovery worker): started once registered, cancelled when the bookie stops."""


def _fail(prog: str, message: str) -> int:
    print(f"{prog}: error: {message}", file=sys.stderr, flush=True)
    return 1


def run_bookie(config: BookieConfig, host: str, port: int, *, prog: str,
               announce: Announce, metrics_port: int | None = None,
               listen: BookieListenConfig | None = None,
               cluster: ClusterConfig | None = None,
               service: ClusterService | None = None) -> int:
    """Serve one bookie until SIGTERM or SIGINT; return the process exit code.

    Args:
        config: the bookie's configuration; its data dir is created if missing.
        host: address to listen on.
        port: port to listen on, 0 for any free one.
        prog: command name for error messages (``folio bookie``).
        announce: the line printed to stdout (and flushed) once serving.
        metrics_port: port of Prometheus ``/metrics`` on ``host``, 0 for any
            free one; None serves no metrics.
        listen: its TLS and authentication settings (None: plain text, open).
        cluster: with a metadata URL, join that cluster: refuse to start if
            it is not initialised, register once serving (``membership``).
        service: in a cluster, run this beside serving (``ClusterService``).

    Returns:
        0 after a clean stop; 1, with one line on stderr and no traceback, if
        the data dir cannot be opened (e.g. another bookie holds it) or the
        address cannot be bound.
    """
    try:
        os.makedirs(config.data_dir, exist_ok=True)
    except OSError as error:
        return _fail(prog, f"cannot create data dir {config.data_dir}: {error}")
    security = listen if listen is not None else BookieListenConfig(host=host, port=port)
    try:
        interceptors = _interceptors(security)
    except ValueError as error:
        return _fail(prog, str(error))
    return asyncio.run(_serve(config, host, port, prog, announce, metrics_port, security,
                              interceptors, cluster, service))


def _interceptors(listen: BookieListenConfig) -> list[grpc.aio.ServerInterceptor[Any, Any]]:
    """Token authentication of the brokers, when configured. ``ValueError`` on a bad key."""
    if not listen.token_auth:
        return []
    verifier = TokenVerifier.from_files(listen.auth_token_secret_file,
                                        listen.auth_token_public_key_file)
    return [AuthInterceptor(verifier, allowed_roles=listen.allowed_roles())]


async def _serve(config: BookieConfig, host: str, port: int, prog: str,
                 announce: Announce, metrics_port: int | None, listen: BookieListenConfig,
                 interceptors: list[grpc.aio.ServerInterceptor[Any, Any]],
                 cluster: ClusterConfig | None, service: ClusterService | None) -> int:
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
        return await _serve_bookie(config, host, port, prog, announce, metrics_port, listen,
                                   interceptors, membership, service)
    finally:
        if membership is not None:
            await membership.close()


async def _serve_bookie(config: BookieConfig, host: str, port: int, prog: str,
                        announce: Announce, metrics_port: int | None,
                        listen: BookieListenConfig,
                        interceptors: list[grpc.aio.ServerInterceptor[Any, Any]],
                        membership: BookieMembership | None,
                        service: ClusterService | None) -> int:
    try:
        bookie = Bookie(config, bookie_id=f"{host}:{port}")
    except StorageError as error:
        hint = ""
        if "lock" in str(error).lower():
            hint = " (is another bookie running on this data dir?)"
        return _fail(prog, f"{error}{hint}")
    try:
        try:
            server, bound = await start_bookie_server(
                bookie, host, port, tls=listen.server_tls(), interceptors=interceptors)
        except (OSError, TlsConfigError) as error:
            return _fail(prog, str(error))
        metrics = None
        if metrics_port is not None:
            try:
                metrics, _thread = start_http_server(
                    metrics_port, addr=host,
                    **(metrics_tls_arguments(listen.server_tls()) if listen.metrics_tls else {}))
            except (OSError, ssl.SSLError) as error:
                await server.stop(0)
                return _fail(prog, f"cannot serve metrics on {host}:{metrics_port}: {error}")
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        install_stack_dump(loop)  # kill -USR2: the tasks' and threads' stacks on stderr
        background: asyncio.Task[None] | None = None
        try:
            if membership is not None:
                try:
                    bookie_id = await membership.register(host, bound)
                except MetadataError as error:
                    return _fail(prog, f"cannot register in the cluster: {error}")
                if service is not None:
                    background = asyncio.create_task(service(membership.store, bookie_id))
            print(announce(bound, None if metrics is None else metrics.server_port), flush=True)
            await stop.wait()
            if background is not None:
                background.cancel()
                try:
                    await background
                except asyncio.CancelledError:
                    pass
                except Exception:  # it ended by itself with a bug: the bookie still stops
                    log.exception("the bookie's cluster service failed")
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
