"""The ledger service's ``folio`` commands: ``folio bookie`` and ``folio autorecovery``.

``folio.cli`` loads ``bookie_command`` and ``autorecovery_command`` through the
``folio.commands`` entry-point group. Settings (``BookieConfig`` and
``BookieListenConfig``) are layered by ``ledger.settings``: defaults <
``--config FILE`` (its ``[bookie]`` table) < environment
(``FOLIO_BOOKIE_DATA_DIR``, ``FOLIO_BOOKIE_PORT``, ... one
``FOLIO_BOOKIE_<FIELD>`` per field) < flags; ``--print-config`` prints the
result as TOML that ``--config`` reads back. The run loop is in
``ledger.bookie.main``.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Mapping

from ledger.api import MetadataStore
from ledger.autorecovery.config import AutoRecoveryConfig, AutoRecoveryListenConfig
from ledger.bookie.client_security import BookieSecurity
from ledger.bookie.collector import GarbageCollectionConfig
from ledger.bookie.main import ClusterService, run_bookie
from ledger.bookie.remote import GrpcBookieClient
from ledger.config import BookieConfig, BookieListenConfig
from ledger.metadata.cluster_config import ClusterConfig
from ledger.settings import Layers, add_arguments, to_toml

__all__ = ["autorecovery_command", "bookie_command", "resolve_bookie_settings",
           "resolve_gc_settings", "setup_logging"]

log = logging.getLogger(__name__)

COMPONENT = "bookie"
BOOKIE_ENV_PREFIX = "FOLIO_BOOKIE_"
_CLASSES = (BookieConfig, BookieListenConfig, ClusterConfig, AutoRecoveryConfig,
            GarbageCollectionConfig)

#: Help of each field's flag (``--data-dir`` for ``data_dir``...).
_FIELD_HELP = {
    "data_dir": "directory of the bookie's RocksDB (created if missing; required)",
    "durability": "sync: acknowledge adds once fsynced (default); async: once in the "
    "write-ahead log, not fsynced (a machine crash may lose acknowledged adds)",
    "max_entry_bytes": "refuse entries larger than this (default 5 MiB)",
    "max_batch_bytes": "cut a group commit at about this many bytes (default 8 MiB)",
    "read_max_bytes": "default byte budget of one read reply (default 4 MiB)",
    "journal": "on: acknowledge adds once in the bookie's journal (fdatasync of one "
    "sequential append per group commit; RocksDB is written in the background; default); "
    "none: once in RocksDB's own write-ahead log (slower, kept for comparison)",
    "journal_dir": "directory of the journal files: put it on its own disk if there is one "
    "(default: DATA_DIR/journal)",
    "journal_file_bytes": "size of each journal file (preallocated in 4 MiB steps); a full one is "
    "rotated and deleted after the next checkpoint (default 64 MiB)",
    "host": "address to listen on (default 127.0.0.1)",
    "port": "port to listen on, 0 for any free one (default 3181)",
    "metrics_port": "port of Prometheus metrics (/metrics), 0 for any free one (default 8000)",
    "tls_cert": "PEM certificate of the gRPC port: with --tls-key it serves TLS; the "
    "files are reloaded when they change (docs/security.md)",
    "tls_key": "PEM private key of --tls-cert",
    "tls_ca": "PEM CA: clients (the brokers) must present a certificate it signed (mutual TLS)",
    "metrics_tls": "serve /metrics over HTTPS with --tls-cert/--tls-key (and --tls-ca); "
    "read at start only",
    "auth_token_secret_file": "HS256 secret: every call needs a JWT signed with it whose "
    "role (sub) is one of --super-users (health and reflection stay open)",
    "auth_token_public_key_file": "RSA or EC public key (RS256, ES256): as "
    "--auth-token-secret-file, for tokens signed with the private key",
    "super_users": "roles allowed to call this bookie (the brokers' roles, "
    "comma-separated); required with a token key",
    **{
        "metadata_url": "join the cluster whose metadata is in this ZooKeeper chroot, "
        "zk://HOST:PORT[,HOST:PORT...]/CHROOT (run `folio cluster init` there first): the "
        "bookie registers there and brokers find it; default: no cluster",
        "advertised_address": "host:port brokers reach this bookie on, registered in the "
        "cluster and used as its id in ledger metadata, so keep it stable across restarts "
        "(default: --host and the port it listens on)",
        "metadata_session_timeout_ms": "ZooKeeper session timeout: a bookie that dies leaves "
        "the available bookies this long after (default 6000)",
        "auto_recovery": "in a cluster, run an auto-recovery worker: re-replicate the ledgers "
        "of bookies lost for good (one worker, elected, audits; every worker copies); "
        "default on, --no-auto-recovery turns it off",
        "auto_recovery_grace_ms": "a registered bookie missing from the live ones this long is "
        "lost for good and its ledgers are re-replicated (default 30000: long enough for a "
        "restart)",
        "auto_recovery_interval_ms": "how often the auto-recovery worker audits and looks for "
        "under-replicated ledgers (default 5000)",
        "auto_recovery_token_file": "file with the JWT the auto-recovery worker sends to the "
        "other bookies when they check tokens (its role must be in their --super-users); "
        "re-read when it changes. The worker also trusts --tls-ca and presents "
        "--tls-cert/--tls-key as its client certificate. Without it on a bookie that checks "
        "tokens, a WARNING at start: the worker would be refused (docs/security.md)",
        "gc": "in a cluster, collect ledgers deleted from the metadata that this bookie still "
        "holds (it missed their delete: down, cut off); default on, --no-gc turns it off "
        "(docs/ledger.md, Garbage collection)",
        "gc_interval_ms": "time between two garbage collection passes; a ledger is deleted "
        "on the second pass that finds its metadata gone (default 900000: 15 minutes)",
        "gc_over_replicated": "the garbage collector also deletes closed ledgers whose "
        "ensembles no longer name this bookie (default off)",
        "gc_rate_per_s": "metadata reads and deletes of one garbage collection pass per "
        "second, at most (default 50)",
    },
}

#: Help of ``folio autorecovery``'s bookie-client flags (as ``folio broker``'s).
_BOOKIE_CLIENT_HELP = {
    "bookie_tls_ca": "PEM CA of the bookies' certificates: set, the worker talks TLS to "
    "the bookies (found through --metadata-url)",
    "bookie_tls_cert": "PEM client certificate for bookies that require one (mutual TLS)",
    "bookie_tls_key": "PEM private key of --bookie-tls-cert",
    "bookie_tls_server_name": "name checked in the bookies' certificates instead of their "
    "host",
    "bookie_token_file": "file with the JWT sent to bookies with token authentication "
    "(its role must be in their --super-users); re-read when it changes",
}


def resolve_bookie_settings(
    args: argparse.Namespace, environ: Mapping[str, str]
) -> tuple[BookieConfig, BookieListenConfig, ClusterConfig, AutoRecoveryConfig]:
    """Layer defaults < ``--config`` < ``environ`` < ``args`` (``ledger.settings``).

    Raises:
        ValueError: a bad value, or no data dir, with a message for the user.
    """
    layers = Layers.from_args(COMPONENT, args, environ)
    layers.check_file_keys(_CLASSES)
    listen, cluster = layers.build(BookieListenConfig), layers.build(ClusterConfig)
    cluster.check_host(listen.host)
    return layers.build(BookieConfig), listen, cluster, layers.build(AutoRecoveryConfig)


def resolve_gc_settings(args: argparse.Namespace,
                        environ: Mapping[str, str]) -> GarbageCollectionConfig:
    """The garbage collector's settings, layered as ``resolve_bookie_settings`` layers.

    Raises:
        ValueError: a bad value, with a message for the user.
    """
    return Layers.from_args(COMPONENT, args, environ).build(GarbageCollectionConfig)


def auto_recovery_service(config: AutoRecoveryConfig,
                          connect: Callable[[str], GrpcBookieClient]) -> ClusterService:
    """The auto-recovery worker as a cluster bookie's background work."""
    async def run(store: MetadataStore, bookie_id: str) -> None:
        # Imported here: the worker is needed only in a cluster.
        from ledger.autorecovery.worker import AutoRecoveryWorker  # noqa: PLC0415

        await AutoRecoveryWorker(store, bookie_id, connect=connect, config=config).run()

    return run


def setup_logging() -> None:
    """Log INFO and up to stderr, one line per record (the server commands' log)."""
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


def _run_bookie(args: argparse.Namespace) -> int:
    try:
        config, listen, cluster, recovery = resolve_bookie_settings(args, os.environ)
        gc = resolve_gc_settings(args, os.environ)
    except ValueError as error:
        print(f"folio bookie: error: {error}", file=sys.stderr)
        return 2
    if args.print_config:
        print(to_toml(COMPONENT, config, listen, cluster, recovery, gc), end="")
        return 0
    setup_logging()

    host = listen.host

    security = " (TLS)" if listen.tls_cert else ""

    def announce(bound: int, metrics_bound: int | None) -> str:
        scheme = "https" if listen.metrics_tls else "http"
        return (f"folio bookie listening on {host}:{bound}{security} "
                f"(data dir {config.data_dir}, durability {config.durability.value}, "
                f"metrics on {scheme}://{host}:{metrics_bound}/metrics"
                + (f", registered as {cluster.address(host, bound)} in {cluster.url()}"
                   if cluster.enabled else "")
                + (", auto-recovery on" if cluster.enabled and recovery.auto_recovery else "")
                + (f", ledger gc every {gc.gc_interval_ms} ms" if cluster.enabled and gc.gc
                   else "")
                + ")")

    service = None
    if cluster.enabled and recovery.auto_recovery:
        # Imported here: the gRPC bookie client is needed only in a cluster.
        from ledger.autorecovery.security import (  # noqa: PLC0415
            in_bookie_connector,
            in_bookie_warnings,
        )
        try:
            connect = in_bookie_connector(listen, recovery)
        except ValueError as error:
            print(f"folio bookie: error: auto-recovery: {error}",
                  file=sys.stderr)
            return 2
        for warning in in_bookie_warnings(listen, recovery):
            log.warning("%s", warning)
        service = auto_recovery_service(recovery, connect)
    return run_bookie(config, host, listen.port, prog="folio bookie", announce=announce,
                      metrics_port=listen.metrics_port, listen=listen, cluster=cluster,
                      service=service, gc=gc)


def bookie_command(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``folio bookie``: one bookie serving the ``folio.ledger.v1.Bookie`` gRPC service."""
    parser = subparsers.add_parser(
        "bookie",
        help="run one bookie of the ledger service (cluster mode)",
        description="Run one bookie: a RocksDB store of ledger entries served over gRPC "
        "(folio.ledger.v1.Bookie, with health checking and reflection) and Prometheus "
        "metrics on /metrics of the metrics port. Once it serves, "
        "it prints one line 'folio bookie listening on HOST:PORT (...)' to stdout. "
        "SIGTERM or SIGINT stop it cleanly. With --metadata-url it joins a cluster on "
        "ZooKeeper, registers there and runs an auto-recovery worker that re-replicates the "
        "ledgers of bookies lost for good (docs/cluster.md). Every option can also be set by an "
        f"environment variable {BOOKIE_ENV_PREFIX}<OPTION> (e.g. "
        f"{BOOKIE_ENV_PREFIX}DATA_DIR) or in the [bookie] table of a --config TOML file; "
        "flags win over the environment, which wins over the file.",
    )
    add_arguments(parser, _CLASSES, component=COMPONENT, help=_FIELD_HELP)
    parser.set_defaults(func=_run_bookie)


AUTORECOVERY = "autorecovery"
_AUTORECOVERY_CLASSES = (ClusterConfig, AutoRecoveryConfig, AutoRecoveryListenConfig,
                         BookieSecurity)
#: Settings of the bookie's that mean nothing to a worker of its own (it takes
#: ``--bookie-token-file`` as a broker does).
_AUTORECOVERY_SKIP = ("advertised_address", "auto_recovery", "auto_recovery_token_file")


def _run_autorecovery(args: argparse.Namespace) -> int:
    try:
        layers = Layers.from_args(AUTORECOVERY, args, os.environ)
        layers.check_file_keys(_AUTORECOVERY_CLASSES, skip=_AUTORECOVERY_SKIP)
        cluster = layers.build(ClusterConfig, skip=_AUTORECOVERY_SKIP,
                               required=("metadata_url",))
        recovery = layers.build(AutoRecoveryConfig, skip=_AUTORECOVERY_SKIP)
        listen = layers.build(AutoRecoveryListenConfig)
        security = layers.build(BookieSecurity)
    except ValueError as error:
        print(f"folio autorecovery: error: {error}", file=sys.stderr)
        return 2
    if args.print_config:
        print(to_toml(AUTORECOVERY, cluster, recovery, listen, security,
                      skip=_AUTORECOVERY_SKIP), end="")
        return 0
    try:
        connect = security.connector()
    except ValueError as error:
        print(f"folio autorecovery: error: {error}", file=sys.stderr)
        return 2
    setup_logging()
    # Imported here: the worker and its gRPC clients are not needed for --help.
    from ledger.autorecovery.main import run_autorecovery  # noqa: PLC0415

    def announce(worker_id: str, metrics_port: int) -> str:
        return (f"folio autorecovery running as {worker_id} in {cluster.url()} (grace "
                f"{recovery.auto_recovery_grace_ms} ms"
                + (", TLS to bookies" if security.bookie_tls_ca else "")
                + (", token to bookies" if security.bookie_token_file else "")
                + "), metrics listening on "
                f"{listen.host}:{metrics_port} (/metrics)")

    return run_autorecovery(cluster, recovery, listen, prog="folio autorecovery",
                            announce=announce, connect=connect)


def autorecovery_command(
        subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``folio autorecovery``: an auto-recovery worker in a process of its own."""
    parser = subparsers.add_parser(
        AUTORECOVERY, help="run an auto-recovery worker on its own (cluster mode)",
        description="Run an auto-recovery worker outside the bookies (for bookies started "
        "with --no-auto-recovery; every `folio bookie --metadata-url` runs one by default): "
        "it re-replicates the ledgers of bookies gone for longer than the grace period until "
        "each has its write quorum again (docs/cluster.md, Auto-recovery). Once working it "
        "prints one line 'folio autorecovery running as ID ... metrics listening on HOST:PORT "
        "(/metrics)'; SIGTERM or SIGINT stop it. In a secured cluster give it the "
        "--bookie-tls-* and --bookie-token-file a broker has (docs/security.md). "
        "Every option can also be set by an environment variable FOLIO_AUTORECOVERY_<OPTION> "
        "or in the [autorecovery] table of a --config TOML file.")
    add_arguments(parser, _AUTORECOVERY_CLASSES, component=AUTORECOVERY,
                  skip=_AUTORECOVERY_SKIP, help={
                      **_FIELD_HELP,
                      **_BOOKIE_CLIENT_HELP,
                      "metadata_url": "the cluster's ZooKeeper chroot, "
                      "zk://HOST:PORT[,HOST:PORT...]/CHROOT (required)",
                      "metadata_session_timeout_ms": "ZooKeeper session timeout: locks of a "
                      "worker that dies are released this long after (default 6000)",
                      "host": "address of /metrics (default 127.0.0.1)",
                      "metrics_port": "port of Prometheus metrics (/metrics), 0 for any free "
                      "one (default 8010)",
                  })
    parser.set_defaults(func=_run_autorecovery)
