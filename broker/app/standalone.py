"""``folio standalone``: the whole of Folio in one process, data under one directory.

``folio broker`` runs the same wiring with the ledgers on ``folio bookie``
processes (``run_standalone(config, remote)``): no bookie in process, the
metadata store still under the data dir.

Metadata in RocksDB (``DATA_DIR/metadata``), one bookie in the same process
(``DATA_DIR/bookie``; measured faster than a bookie one loopback hop away, see
docs/ledger.md), the broker serving the public gRPC API, and Prometheus
metrics over HTTP.

A ledger entry holds up to ``MAX_ENTRY_BYTES`` (16 MiB + 1 MiB headroom for
entry and frame headers): a single-routing-key transaction of up to 16 MiB of
blocks is written as ONE entry (``broker.txn.held``).

Startup prints one line to stdout once everything serves (``folio standalone
listening on HOST:PORT ...``); scripts and tests read the port from it.

Shutdown (SIGTERM or SIGINT) goes outside in: the server stops taking calls
and lets streams finish what they started (``BrokerServer.stop``), then the
topics close their ledgers cleanly, then the bookie and the metadata store
close. A SIGKILL skips all of it, which is safe: an append is acknowledged
only once durable, and the next start recovers every segment (fencing its
last ledger).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import ssl
import sys
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import grpc
from prometheus_client import start_http_server

from broker.api import TopicConfig, Topics
from broker.app.cluster_ownership import ClusterOwnership
from broker.app.kafka_listener import KafkaUnavailableError, start_kafka
from broker.app.storage_watch import StorageWatch
from broker.auth import Access, AclStore, Authorizer
from broker.broker_config import BookieSecurity, BrokerConfig, RemoteBookies
from broker.groups.backlog import GroupBacklog
from broker.groups.liveness import GroupLiveness
from broker.groups.store import ReaderGroupStore
from broker.metrics import watch_broker
from broker.services.server import SERVICE_NAMES, start_broker_server
from broker.standalone_config import StandaloneConfig
from broker.system.snapshot_store import snapshot_store
from broker.topics.manager import TopicManager
from broker.txn.commit_keys import CommitKeys
from broker.txn.coordinator import TxnCoordinator
from broker.txn.faults import NO_TXN_FAULTS, TxnFaults
from broker.txn.held import MAX_TXN_BYTES
from ledger.api import MetadataStore
from ledger.bookie.bookie import Bookie
from ledger.client.directory import BookieDirectory
from ledger.client.ledger_client import LedgerClient
from ledger.config import BookieConfig, Durability, LedgerConfig
from ledger.errors import LedgerError, StorageError
from ledger.metadata.rocksdb_store import RocksDBMetadataStore
from ledger.security.interceptor import AuthInterceptor
from ledger.security.tls import TlsConfigError, metrics_tls_arguments
from ledger.security.tokens import TokenVerifier
from ledger.stack_dump import DUMP_SIGNAL, install_stack_dump

__all__ = ["MAX_ENTRY_BYTES", "run_standalone", "serve_ledgers", "serve_until_signal",
           "set_running"]

log = logging.getLogger(__name__)

#: Longest a stopping cluster broker spends handing its containers over.
HANDOVER_TIMEOUT_S = 15.0

#: Largest ledger entry: a whole transaction (``MAX_TXN_BYTES``) plus headroom.
MAX_ENTRY_BYTES = MAX_TXN_BYTES + 1024 * 1024


#: The command being run and where its ledgers live, for its messages and ready line.
_RUNNING: ContextVar[tuple[str, str]] = ContextVar("running", default=("folio standalone", ""))


def _fail(message: str) -> int:
    print(f"{_RUNNING.get()[0]}: error: {message}", file=sys.stderr, flush=True)
    return 1


def run_standalone(config: BrokerConfig, remote: RemoteBookies | None = None,
                   bookie_security: BookieSecurity | None = None, *,
                   txn_faults: TxnFaults = NO_TXN_FAULTS) -> int:
    """Serve until SIGTERM or SIGINT; returns the exit code (1 with one stderr line on failure).

    With ``remote`` (``folio broker``) the ledgers are on those bookies, whose
    durability is theirs to decide, reached with ``bookie_security`` (default:
    plain text, no token); without, a bookie runs in process with
    the ``durability`` of a ``StandaloneConfig`` (``sync`` for a plain ``BrokerConfig``).
    ``txn_faults``: hooks into the coordinator's crash windows, for a test's own
    process (``broker.txn.faults``); the commands never pass any.
    """
    _RUNNING.set(("folio broker", f"data dir {config.data_dir}, bookies {remote.bookies}")
                 if remote is not None else
                 ("folio standalone",
                  f"data dir {config.data_dir}, durability {_durability(config).value}"))
    try:
        os.makedirs(config.data_dir, exist_ok=True)
    except OSError as error:
        return _fail(f"cannot create data dir {config.data_dir}: {error}")
    return asyncio.run(serve_until_signal(
        lambda stop: _serve_with(config, stop, remote, bookie_security or BookieSecurity(),
                                 txn_faults)))


def _durability(config: BrokerConfig) -> Durability:
    return config.durability if isinstance(config, StandaloneConfig) else Durability.SYNC


async def serve_until_signal(body: Callable[[asyncio.Event], Awaitable[int]]) -> int:
    """Run ``body(stop)``; SIGTERM or SIGINT set ``stop`` (a second one only logs).

    SIGUSR2 writes every task's and thread's stack to stderr (``ledger.stack_dump``).
    """
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_signal(signum: signal.Signals) -> None:
        if stop.is_set():
            log.warning("%s while stopping: already stopping gracefully (SIGKILL stops at once)",
                        signum.name)
        stop.set()

    # Installed for the whole run: a second signal must not cut short the
    # graceful stop the first one started (ledgers close at the very end).
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, on_signal, signum)
    install_stack_dump(loop)  # kill -USR2: the tasks' and threads' stacks on stderr
    try:
        return await body(stop)
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT, DUMP_SIGNAL):
            loop.remove_signal_handler(signum)


async def _serve_with(config: BrokerConfig, stop: asyncio.Event,
                      remote: RemoteBookies | None, security: BookieSecurity,
                      txn_faults: TxnFaults) -> int:
    root = Path(config.data_dir)
    try:
        store = RocksDBMetadataStore(root / "metadata")
    except LedgerError as error:
        return _fail(f"{error} (is another folio process using {root}?)")
    bookie: Bookie | None = None
    try:
        if remote is not None:
            try:
                directory = remote.directory(security)
            except ValueError as error:
                return _fail(str(error))
            quorums = {"ensemble_size": remote.ensemble_size,
                       "write_quorum": remote.write_quorum, "ack_quorum": remote.ack_quorum}
        else:
            try:
                bookie = Bookie(BookieConfig(data_dir=str(root / "bookie"),
                                             durability=_durability(config),
                                             max_entry_bytes=MAX_ENTRY_BYTES))
            except StorageError as error:
                return _fail(f"{error} (is another folio process using {root}?)")
            directory, quorums = BookieDirectory([bookie]), {}
        return await serve_ledgers(config, store, directory, quorums, stop, bookie=bookie,
                                   txn_faults=txn_faults)
    finally:
        if bookie is not None:
            bookie.shutdown()
        await store.close()
        log.info("%s stopped", _RUNNING.get()[0])


def set_running(command: str, where: str) -> None:
    """Name the command and where its data lives, for its error messages and ready line."""
    _RUNNING.set((command, where))


async def serve_ledgers(
    config: BrokerConfig, store: MetadataStore, directory: BookieDirectory,
    quorums: dict[str, int], stop: asyncio.Event, *, bookie: Bookie | None = None,
    txn_faults: TxnFaults = NO_TXN_FAULTS,
    on_serving: Callable[[int], Awaitable[str | None]] | None = None,
    on_stopping: Callable[[], Awaitable[None]] | None = None,
    ownership: ClusterOwnership | None = None,
) -> int:
    """Serve the broker on ``store`` and the bookies of ``directory`` until ``stop``.

    ``ownership`` (a cluster broker): the services serve only the segments of
    the containers this broker owns (``broker.app.cluster_ownership``).

    ``on_serving(port)`` runs once the API is bound, before the ready line; an
    error message it returns fails the start (``folio broker`` in a cluster
    registers there). ``on_stopping()`` runs once ``stop`` is set, before the
    server stops taking calls (a cluster broker unregisters there). The caller
    closes ``store``; the ledger client closes ``directory``.
    """
    ledgers = LedgerClient(store, directory, LedgerConfig(
        max_entry_bytes=MAX_ENTRY_BYTES,
        max_add_request_bytes=max(MAX_ENTRY_BYTES, LedgerConfig.max_add_request_bytes),
        **quorums))
    topics = TopicManager(ledgers, store,
                          txn_store_factory=snapshot_store if ownership is None
                          else ownership.snapshot_store,
                          defaults=TopicConfig(),
                          retention_interval_s=config.retention_interval_s,
                          writer_expiry_ms=config.writer_expiry_ms,
                          txn_snapshots=config.txn_snapshots(),
                          reload_fenced=ownership is not None)
    limit = topics.txn_snapshot_store().max_record_bytes
    if config.txn_snapshot_chunk_bytes > limit:
        await ledgers.close()
        return _fail(f"txn_snapshot_chunk_bytes={config.txn_snapshot_chunk_bytes} exceeds "
                     f"the largest snapshot record, {limit} bytes")
    await topics.start()
    try:
        # Replays the transaction log, finishing commits and aborts a crash cut short.
        coordinator = TxnCoordinator(topics, faults=txn_faults)
        if ownership is None:
            # A cluster broker replays only once it owns the coordinator's container
            # (broker.app.cluster_ownership): a replay here would fence the log of
            # the coordinator running elsewhere.
            await coordinator.start()
        topics.add_maintenance_hook(coordinator.tick)
        watch_broker(topics, coordinator)
        groups = ReaderGroupStore(store)
        # Declares reader group members silent for their session timeout offline.
        liveness = GroupLiveness(groups)
        liveness.start()
        topics.add_maintenance_hook(GroupBacklog(groups, topics, liveness).update)
        try:
            return await _serve_topics(config, topics, stop, coordinator, groups, liveness,
                                       bookie, directory if bookie is not None else None,
                                       store, on_serving, on_stopping, ownership)
        finally:
            await liveness.close()
            await coordinator.close()
    finally:
        await topics.close()
        await ledgers.close()


async def _serve_topics(
    config: BrokerConfig, topics: TopicManager, stop: asyncio.Event,
    coordinator: TxnCoordinator, groups: ReaderGroupStore, liveness: GroupLiveness,
    bookie: Bookie | None, directory: BookieDirectory | None, store: MetadataStore,
    on_serving: Callable[[int], Awaitable[str | None]] | None,
    on_stopping: Callable[[], Awaitable[None]] | None,
    ownership: ClusterOwnership | None = None,
) -> int:
    commit_keys = CommitKeys(topics, coordinator)
    if ownership is None:  # a cluster broker: on taking the coordinator over
        await commit_keys.start()  # settles the idempotent commits a crash cut short
    acls = AclStore(store)
    await acls.start()
    try:
        interceptors = _interceptors(config, acls)
    except ValueError as error:
        await acls.close()
        return _fail(str(error))
    try:
        return await _serve_api(config, topics, stop, coordinator, commit_keys, groups,
                                liveness, bookie, directory, store, acls, interceptors,
                                on_serving, on_stopping, ownership)
    finally:
        await acls.close()


def _interceptors(config: BrokerConfig,
                  acls: AclStore) -> list[grpc.aio.ServerInterceptor[Any, Any]]:
    """Token authentication and permissions, when configured. ``ValueError``: a bad key file."""
    if not config.token_auth:
        return []
    verifier = TokenVerifier.from_files(config.auth_token_secret_file,
                                        config.auth_token_public_key_file)
    authorizer = Authorizer(acls, config.super_user_roles())
    return [AuthInterceptor(verifier, authorize=authorizer.wrap)]


async def _serve_api(
    config: BrokerConfig, topics: TopicManager, stop: asyncio.Event,
    coordinator: TxnCoordinator, commit_keys: CommitKeys, groups: ReaderGroupStore,
    liveness: GroupLiveness, bookie: Bookie | None, directory: BookieDirectory | None,
    store: MetadataStore, acls: AclStore, interceptors: list[grpc.aio.ServerInterceptor[Any, Any]],
    on_serving: Callable[[int], Awaitable[str | None]] | None,
    on_stopping: Callable[[], Awaitable[None]] | None,
    ownership: ClusterOwnership | None,
) -> int:
    try:
        served: Topics = topics
        if ownership is not None:
            served = await ownership.attach(topics, coordinator, commit_keys)
            ownership.share_liveness(liveness)
        server = await start_broker_server(served, config.host, config.port,
                                           max_held_bytes=config.max_held_bytes,
                                           max_held_ms=config.max_held_ms,
                                           coordinator=coordinator, commit_keys=commit_keys,
                                           groups=groups, group_liveness=liveness,
                                           tls=config.server_tls(), acls=acls,
                                           interceptors=interceptors,
                                           owners=None if ownership is None
                                           else ownership.owners,
                                           transactions_gate=None if ownership is None
                                           else ownership.transactions_gate,
                                           txn_routes=None if ownership is None
                                           else ownership.routes)
    except (OSError, TlsConfigError) as error:
        return _fail(str(error))
    try:
        metrics, _thread = start_http_server(
            config.metrics_port, addr=config.host,
            **(metrics_tls_arguments(config.server_tls()) if config.metrics_tls else {}))
    except (OSError, ssl.SSLError) as error:
        await server.stop(0)
        return _fail(f"cannot serve metrics on {config.host}:{config.metrics_port}: {error}")
    try:
        kafka = await start_kafka(config, topics, store, coordinator, ownership=ownership,
                                  served=served, access=Access(acls, config.super_user_roles())
                                  if config.token_auth else None)
    except (OSError, ValueError, KafkaUnavailableError) as error:
        await server.stop(0)
        metrics.shutdown()
        return _fail(str(error))
    # Health NOT_SERVING while the in-process bookie's disk refuses writes.
    watch = (StorageWatch(bookie, server.health, SERVICE_NAMES, directory)
             if bookie is not None else None)
    if watch is not None:
        watch.start()
    try:
        if on_serving is not None:
            failure = await on_serving(server.port)
            if failure is not None:
                return _fail(failure)
        command, where = _RUNNING.get()
        security = ", TLS" if config.tls_cert else ""
        security += ", token authentication" if config.token_auth else ""
        scheme = "https" if config.metrics_tls else "http"
        kafka_line = "" if kafka is None else f", kafka on {config.host}:{kafka.port}"
        print(f"{command} listening on {config.host}:{server.port} ({where}{security}, "
              f"metrics on {scheme}://{config.host}:{metrics.server_port}/metrics{kafka_line})",
              flush=True)
        await stop.wait()
        if ownership is not None:
            # Hand the containers over while still answering (WrongHost). Bounded: a
            # hand-over stuck on the metadata store must not keep the process from
            # stopping; what is not released goes with the session, and the next
            # owner fences the ledgers (docs/cluster.md, "Handover").
            try:
                await asyncio.wait_for(ownership.stop(), HANDOVER_TIMEOUT_S)
            except TimeoutError:
                log.warning("stopping: the containers' hand-over took over %.0f s; the rest "
                            "goes with the ZooKeeper session", HANDOVER_TIMEOUT_S)
        if on_stopping is not None:
            await on_stopping()
        log.info("stopping: no new calls, %.0f s for those in flight", config.stop_grace_s)
    finally:
        if watch is not None:
            await watch.close()
        if kafka is not None:
            await kafka.stop()
        await server.stop(config.stop_grace_s)
        with contextlib.suppress(Exception):
            metrics.shutdown()
    return 0
