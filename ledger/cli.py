"""The ledger service's ``folio`` command: ``folio bookie``.

``folio.cli`` loads ``bookie_command`` through the
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
from collections.abc import Mapping

from ledger.bookie.main import run_bookie
from ledger.config import BookieConfig, BookieListenConfig
from ledger.metadata.cluster_config import ClusterConfig
from ledger.settings import Layers, add_arguments, to_toml

__all__ = ["bookie_command", "resolve_bookie_settings", "setup_logging"]

COMPONENT = "bookie"
BOOKIE_ENV_PREFIX = "FOLIO_BOOKIE_"
_CLASSES = (BookieConfig, BookieListenConfig, ClusterConfig)

#: Help of each field's flag (``--data-dir`` for ``data_dir``...).
_FIELD_HELP = {
    "data_dir": "directory of the bookie's RocksDB (created if missing; required)",
    "durability": "sync: acknowledge adds once fsynced (default); async: once in the "
    "write-ahead log, not fsynced (a machine crash may lose acknowledged adds)",
    "max_entry_bytes": "refuse entries larger than this (default 5 MiB)",
    "max_batch_bytes": "cut a group commit at about this many bytes (default 64 MiB)",
    "read_max_bytes": "default byte budget of one read reply (default 4 MiB)",
    "host": "address to listen on (default 127.0.0.1)",
    "port": "port to listen on, 0 for any free one (default 3181)",
    "metrics_port": "port of Prometheus metrics (/metrics), 0 for any free one (default 8000)",
    **{
        "metadata_url": "join the cluster whose metadata is in this ZooKeeper chroot, "
        "zk://HOST:PORT[,HOST:PORT...]/CHROOT (run `folio cluster init` there first): the "
        "bookie registers there and brokers find it; default: no cluster",
        "advertised_address": "host:port brokers reach this bookie on, registered in the "
        "cluster and used as its id in ledger metadata, so keep it stable across restarts "
        "(default: --host and the port it listens on)",
        "metadata_session_timeout_ms": "ZooKeeper session timeout: a bookie that dies leaves "
        "the available bookies this long after (default 6000)",
    },
}


def resolve_bookie_settings(
    args: argparse.Namespace, environ: Mapping[str, str]
) -> tuple[BookieConfig, BookieListenConfig, ClusterConfig]:
    """Layer defaults < ``--config`` < ``environ`` < ``args`` (``ledger.settings``).

    Raises:
        ValueError: a bad value, or no data dir, with a message for the user.
    """
    layers = Layers.from_args(COMPONENT, args, environ)
    layers.check_file_keys(_CLASSES)
    listen, cluster = layers.build(BookieListenConfig), layers.build(ClusterConfig)
    cluster.check_host(listen.host)
    return layers.build(BookieConfig), listen, cluster


def setup_logging() -> None:
    """Log INFO and up to stderr, one line per record (the server commands' log)."""
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


def _run_bookie(args: argparse.Namespace) -> int:
    try:
        config, listen, cluster = resolve_bookie_settings(args, os.environ)
    except ValueError as error:
        print(f"folio bookie: error: {error}", file=sys.stderr)
        return 2
    if args.print_config:
        print(to_toml(COMPONENT, config, listen, cluster), end="")
        return 0
    setup_logging()

    host = listen.host

    def announce(bound: int, metrics_bound: int | None) -> str:
        return (f"folio bookie listening on {host}:{bound} "
                f"(data dir {config.data_dir}, durability {config.durability.value}, "
                f"metrics on http://{host}:{metrics_bound}/metrics"
                + (f", registered as {cluster.address(host, bound)} in {cluster.url()}"
                   if cluster.enabled else "") + ")")

    return run_bookie(config, host, listen.port, prog="folio bookie", announce=announce,
                      metrics_port=listen.metrics_port, cluster=cluster)


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
        "ZooKeeper and registers there (docs/cluster.md). Every option can also be set by an "
        f"environment variable {BOOKIE_ENV_PREFIX}<OPTION> (e.g. "
        f"{BOOKIE_ENV_PREFIX}DATA_DIR) or in the [bookie] table of a --config TOML file; "
        "flags win over the environment, which wins over the file.",
    )
    add_arguments(parser, _CLASSES, component=COMPONENT, help=_FIELD_HELP)
    parser.set_defaults(func=_run_bookie)
