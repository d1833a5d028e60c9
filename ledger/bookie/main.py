"""Run a bookie process: open the store, serve it over gRPC, stop on a signal.

Used by ``folio bookie``
(``ledger.cli`` parses their options). The process announces itself with one
line on stdout once it accepts RPCs, which is how scripts and tests learn the
port it bound when asked for port 0; everything else goes to the log (stderr).
It also serves Prometheus metrics (``ledger.metrics``) on ``/metrics`` of its
metrics port.

The process is a ``ledger.lifecycle.ComponentStack`` run by ``run_process``
(signals, the ready line, the SIGUSR2 stack dump). Shutdown order matters:
the server stops before the storage (in-flight RPCs get a grace period to
finish, which includes waiting for their group commit), so no acknowledged
add is cut short. A SIGKILL skips all of it, which is fine: an add is
acknowledged only once durable.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

import grpc

from ledger.api import MetadataStore
from ledger.bookie.bookie import Bookie
from ledger.bookie.collector import GarbageCollectionConfig, LedgerCollector
from ledger.bookie.service import start_bookie_server
from ledger.components import Background, MetricsServer
from ledger.config import BookieConfig, BookieListenConfig
from ledger.errors import MetadataError, StorageError
from ledger.lifecycle import ComponentStack, StartError, run_process
from ledger.metadata.cluster_config import ClusterConfig
from ledger.security.interceptor import AuthInterceptor
from ledger.security.tls import TlsConfigError, metrics_tls_arguments
from ledger.security.tokens import TokenVerifier

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
               service: ClusterService | None = None,
               gc: GarbageCollectionConfig | None = None) -> int:
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
        gc: in a cluster, collect the ledgers deleted from the metadata
            (``ledger.bookie.collector``) when ``gc.gc``; None: no collector.

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
    stack, server, metrics = _stack(prog, config, host, port, security, interceptors,
                                    metrics_port, cluster, service, gc)
    return run_process(prog, lambda: stack, lambda: announce(
        server.port, None if metrics is None else metrics.port))


def _interceptors(listen: BookieListenConfig) -> list[grpc.aio.ServerInterceptor[Any, Any]]:
    """Token authentication of the brokers, when configured. ``ValueError`` on a bad key."""
    if not listen.token_auth:
        return []
    verifier = TokenVerifier.from_files(listen.auth_token_secret_file,
                                        listen.auth_token_public_key_file)
    return [AuthInterceptor(verifier, allowed_roles=listen.allowed_roles())]


def _stack(prog: str, config: BookieConfig, host: str, port: int, listen: BookieListenConfig,
           interceptors: list[grpc.aio.ServerInterceptor[Any, Any]], metrics_port: int | None,
           cluster: ClusterConfig | None, service: ClusterService | None,
           gc: GarbageCollectionConfig | None = None,
           ) -> tuple[ComponentStack, _BookieServer, MetricsServer | None]:
    """The bookie's components, in start order (they stop in reverse).

    Stopping: the garbage collector and the cluster service, then the
    registration (brokers place no new ledgers here while it stops), the
    metrics, the gRPC server (in-flight RPCs get ``STOP_GRACE_S``, including
    their group commit), the storage, and the cluster session last.
    """
    stack = ComponentStack(prog)
    membership: _Membership | None = None
    if cluster is not None and cluster.enabled:
        membership = stack.add(_Membership(cluster))
    storage = stack.add(_Storage(config, f"{host}:{port}"))
    server = stack.add(_BookieServer(storage, host, port, listen, interceptors),
                       stop_timeout_s=STOP_GRACE_S + 5)
    metrics = None
    if metrics_port is not None:
        metrics = stack.add(MetricsServer(host, metrics_port, (
            lambda: metrics_tls_arguments(listen.server_tls())) if listen.metrics_tls else None))
    if membership is not None:
        registration = stack.add(_Registration(membership, host, server))
        if service is not None:
            async def work() -> None:
                await service(membership.store, registration.bookie_id)

            stack.add(Background("the bookie's cluster service", work))
        if gc is not None and gc.gc:
            stack.add(Background("the bookie's ledger garbage collector",
                                 _collector(storage, registration, membership, gc)))
    return stack, server, metrics


def _collector(storage: _Storage, registration: _Registration, membership: _Membership,
               config: GarbageCollectionConfig) -> Callable[[], Coroutine[Any, Any, None]]:
    """The collector's work: made once the storage is open and the bookie registered."""
    async def collect() -> None:
        if storage.bookie is None:
            raise RuntimeError("the bookie storage is not open")
        await LedgerCollector(storage.bookie, registration.bookie_id, membership.store,
                              config).run()

    return collect


class _Membership:
    """The cluster's session: connected first (the cluster must be initialised), closed last."""

    name = "cluster membership"

    def __init__(self, cluster: ClusterConfig) -> None:
        self._cluster = cluster
        self._membership: BookieMembership | None = None

    @property
    def membership(self) -> BookieMembership:
        if self._membership is None:
            raise RuntimeError("not connected")
        return self._membership

    @property
    def store(self) -> MetadataStore:
        return self.membership.store

    async def start(self) -> None:
        try:
            # Imported here: kazoo (the `cluster` extra) is needed only in a cluster.
            from ledger.bookie.membership import BookieMembership  # noqa: PLC0415
        except ImportError as error:
            raise StartError(f"--metadata-url needs the ZooKeeper client kazoo ({error}): "
                             "pip install 'folio[cluster]'") from None
        try:
            self._membership = await BookieMembership.connect(self._cluster)
        except MetadataError as error:
            raise StartError(str(error)) from None

    async def stop(self) -> None:
        await self.membership.close()


class _Storage:
    """The bookie's RocksDB; shut down inside the loop, after the server stopped.

    Inside the loop, so that completions of adds still queued (from RPCs
    cancelled by the stop) land on a live loop rather than a closed one.
    """

    name = "bookie storage"

    def __init__(self, config: BookieConfig, bookie_id: str) -> None:
        self._config = config
        self._bookie_id = bookie_id
        self.bookie: Bookie | None = None

    async def start(self) -> None:
        try:
            self.bookie = Bookie(self._config, bookie_id=self._bookie_id)
        except StorageError as error:
            hint = ""
            if "lock" in str(error).lower():
                hint = " (is another bookie running on this data dir?)"
            raise StartError(f"{error}{hint}") from None

    async def stop(self) -> None:
        if self.bookie is not None:
            self.bookie.shutdown()


class _BookieServer:
    """The bookie's gRPC service; ``port`` once bound."""

    name = "bookie gRPC server"

    def __init__(self, storage: _Storage, host: str, port: int, listen: BookieListenConfig,
                 interceptors: list[grpc.aio.ServerInterceptor[Any, Any]]) -> None:
        self._storage = storage
        self._host = host
        self._requested = port
        self._listen = listen
        self._interceptors = interceptors
        self._server: grpc.aio.Server | None = None
        self.port = 0

    async def start(self) -> None:
        assert self._storage.bookie is not None
        try:
            self._server, self.port = await start_bookie_server(
                self._storage.bookie, self._host, self._requested, tls=self._listen.server_tls(),
                interceptors=self._interceptors)
        except (OSError, TlsConfigError) as error:
            raise StartError(str(error)) from None

    async def stop(self) -> None:
        log.info("stopping: no new RPCs, %.0f s for those in flight", STOP_GRACE_S)
        if self._server is not None:
            await self._server.stop(STOP_GRACE_S)


class _Registration:
    """``/bookies/available/<id>`` while serving (``BookieMembership.register``)."""

    name = "bookie registration"

    def __init__(self, membership: _Membership, host: str, server: _BookieServer) -> None:
        self._membership = membership
        self._host = host
        self._server = server
        self.bookie_id = ""

    async def start(self) -> None:
        try:
            self.bookie_id = await self._membership.membership.register(self._host,
                                                                         self._server.port)
        except MetadataError as error:
            raise StartError(f"cannot register in the cluster: {error}") from None

    async def stop(self) -> None:
        # Unregistered first: brokers place no new ledgers here while it stops.
        await self._membership.membership.unregister()
