"""``folio broker``: the broker alone, its ledgers on ``folio bookie`` processes.

The same wiring as ``folio standalone`` (``broker.app.standalone.run_standalone``)
with a ``RemoteBookies`` instead of a bookie in process: the metadata store
under ``--data-dir``, the public gRPC API on ``--port`` and Prometheus metrics
on ``--metrics-port``. ``folio.cli`` loads ``broker_command`` through the
``folio.commands`` entry-point group. Settings (``BrokerConfig`` and
``RemoteBookies``) are layered by ``ledger.settings``: defaults <
``--config FILE`` (its ``[broker]`` table) < environment
(``FOLIO_BROKER_<OPTION>``) < flags; ``--print-config`` prints them as TOML.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field

from broker.app.standalone_cli import _HELP as STANDALONE_HELP
from broker.broker_config import BookieSecurity, BrokerConfig
from broker.remote_settings import PeerSettings, RemoteBookies
from ledger.cli import setup_logging
from ledger.metadata.cluster_config import ClusterConfig
from ledger.settings import Layers, add_arguments, to_toml

__all__ = ["BrokerSettings", "broker_command", "resolve_broker_settings"]

COMPONENT = "broker"
ENV_PREFIX = "FOLIO_BROKER_"
_CLASSES = (BrokerConfig, RemoteBookies, BookieSecurity, ClusterConfig, PeerSettings)
_QUORUMS = ("ensemble_size", "write_quorum", "ack_quorum")

_HELP = {
    **STANDALONE_HELP,
    "data_dir": "directory of the metadata store, created if missing (default ./folio-data; "
    "unused with --metadata-url)",
    "bookies": "the bookies (folio bookie processes), host:port comma-separated (required "
    "without --metadata-url; with it the broker finds them in ZooKeeper)",
    "ensemble_size": "bookies each ledger is striped over (default 1; in a cluster, the "
    "layout's from `folio cluster init`)",
    "write_quorum": "copies of each entry (default 1; in a cluster, the layout's)",
    "ack_quorum": "copies durable before an append is acknowledged (default 1; in a "
    "cluster, the layout's)",
    "metadata_url": "run as a member of the cluster whose metadata is in this ZooKeeper "
    "chroot, zk://HOST:PORT[,HOST:PORT...]/CHROOT (run `folio cluster init` there first): "
    "metadata in ZooKeeper, bookies found there; default: none (metadata under --data-dir)",
    "advertised_address": "host:port clients should use to reach this broker, registered "
    "in the cluster (default: --host and the port it listens on)",
    "metadata_session_timeout_ms": "ZooKeeper session timeout: a broker that dies leaves "
    "the live brokers this long after (default 6000)",
    "bookie_tls_ca": "PEM CA of the bookies' certificates: set, the broker talks TLS to "
    "its bookies (named by --bookies or found through --metadata-url)",
    "bookie_tls_cert": "PEM client certificate for bookies that require one (mutual TLS)",
    "bookie_tls_key": "PEM private key of --bookie-tls-cert",
    "bookie_tls_server_name": "name checked in the bookies' certificates instead of their "
    "host",
    "bookie_token_file": "file with the JWT sent to bookies with token authentication "
    "(its role must be in their --super-users); re-read when it changes",
    "peer_tls_ca": "with --metadata-url and --tls-cert: PEM CA of the other brokers' "
    "certificates, for the internal calls between brokers (default: --tls-ca, else the "
    "system's roots)",
    "peer_tls_server_name": "name checked in the other brokers' certificates instead of "
    "their host",
    "peer_token_file": "with --metadata-url: file with the JWT sent to the other brokers "
    "when they check tokens (its role must be in their --super-users; transactions across "
    "brokers need it); re-read when it changes",
}


@dataclass(frozen=True)
class BrokerSettings:
    """What ``folio broker`` runs with: the broker's settings and where its ledgers are.

    Attributes:
        config: the broker's own settings.
        remote: the bookies of ``--bookies`` (None in a cluster).
        bookie_security: TLS and token towards the bookies, named or found
            in the cluster.
        cluster: the cluster settings (``cluster.enabled``: in a cluster).
        quorum_overrides: quorums set explicitly (in a cluster they replace
            the layout's defaults).
    """

    config: BrokerConfig
    remote: RemoteBookies | None
    bookie_security: BookieSecurity
    cluster: ClusterConfig
    quorum_overrides: dict[str, int]
    #: How a cluster broker reaches the other brokers.
    peers: PeerSettings = field(default_factory=PeerSettings)


def resolve_broker_settings(
    args: argparse.Namespace, environ: Mapping[str, str]
) -> BrokerSettings:
    """Defaults < ``--config`` < ``environ`` < ``args``. ``ValueError`` names a bad setting."""
    layers = Layers.from_args(COMPONENT, args, environ)
    layers.check_file_keys(_CLASSES)
    config, cluster = layers.build(BrokerConfig), layers.build(ClusterConfig)
    security = layers.build(BookieSecurity)
    cluster.check_host(config.host)
    if not cluster.enabled:
        return BrokerSettings(config, layers.build(RemoteBookies, required=["bookies"]),
                              security, cluster, {})
    found, bookies = layers.value("bookies", str)
    if found and bookies:
        raise ValueError("--bookies and --metadata-url exclude each other: in a cluster the "
                         "broker finds the bookies registered in ZooKeeper")
    overrides: dict[str, int] = {}
    for name in _QUORUMS:
        found, value = layers.value(name, int)
        if found:
            overrides[name] = int(value)  # type: ignore[call-overload]
    _check_partial_quorums(overrides)
    if (config.kafka_port != -1 and not config.kafka_advertised_host
            and config.host in ("0.0.0.0", "::", "")):
        # Other brokers publish this host to Kafka clients (Metadata leaders).
        raise ValueError("--kafka-port on a broker listening on every interface needs "
                         "--kafka-advertised-host: the host Kafka clients are told to use")
    peers = layers.build(PeerSettings)
    peers.security(config)  # checked now: a bad combination is a usage error
    return BrokerSettings(config, None, security, cluster, overrides, peers)


def _check_partial_quorums(overrides: dict[str, int]) -> None:
    """Check the quorums set explicitly against each other (the rest come from the layout)."""
    ordered = [(name, overrides[name]) for name in _QUORUMS if name in overrides]
    for index, (name, value) in enumerate(ordered):
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
        for later, later_value in ordered[index + 1:]:
            if value < later_value:
                raise ValueError("quorums must satisfy ensemble_size >= write_quorum >= "
                                 f"ack_quorum >= 1, got {name}={value} < {later}={later_value}")


def _run(args: argparse.Namespace) -> int:
    try:
        settings = resolve_broker_settings(args, os.environ)
    except ValueError as error:
        print(f"folio broker: error: {error}", file=sys.stderr, flush=True)
        return 2
    if args.print_config:
        if settings.remote is not None:
            print(to_toml(COMPONENT, settings.config, settings.remote, settings.bookie_security,
                          settings.cluster), end="")
        else:
            print(to_toml(COMPONENT, settings.config, settings.bookie_security,
                          settings.cluster, settings.peers), end="")
            for name, value in settings.quorum_overrides.items():
                print(f"{name} = {value}")
        return 0
    setup_logging()
    if settings.cluster.enabled:
        try:
            # Imported here so `folio --help` stays fast and works without kazoo.
            from broker.app.cluster_broker import run_cluster_broker  # noqa: PLC0415
        except ImportError as error:
            print(f"folio broker: error: --metadata-url needs the ZooKeeper client kazoo "
                  f"({error}): pip install 'folio[cluster]'", file=sys.stderr, flush=True)
            return 2
        return run_cluster_broker(settings.config, settings.cluster, settings.quorum_overrides,
                                  settings.bookie_security, settings.peers)
    # Imported here so `folio --help` stays fast.
    from broker.app.standalone import run_standalone  # noqa: PLC0415

    if settings.remote is None:  # resolve_broker_settings requires bookies without a cluster
        print("folio broker: error: --bookies is required", file=sys.stderr, flush=True)
        return 2
    return run_standalone(settings.config, settings.remote, settings.bookie_security)


def broker_command(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``folio broker``: the broker and its metrics, ledgers on remote bookies."""
    parser = subparsers.add_parser(
        "broker",
        help="run the broker alone, its ledgers on `folio bookie` processes",
        description="Run the broker: the public gRPC API (Admin, Append, Produce, Read, "
        "Transactions, with health checking and reflection) and Prometheus metrics, its "
        "ledgers on the bookies named by --bookies (start them with `folio bookie`; give "
        "them --max-entry-bytes 17825792 to take 16 MiB transactions) and its metadata "
        "under --data-dir; or, with --metadata-url, as a member of a cluster on ZooKeeper "
        "(metadata there, bookies found there: docs/cluster.md). Once it serves it prints "
        "one line 'folio broker listening on HOST:PORT (...)' to stdout. SIGTERM or SIGINT "
        "stop it gracefully. Every option "
        f"can also be set by an environment variable {ENV_PREFIX}<OPTION> (e.g. "
        f"{ENV_PREFIX}BOOKIES) or in the [broker] table of a --config TOML file; flags win "
        "over the environment, which wins over the file.",
    )
    add_arguments(parser, _CLASSES, component=COMPONENT, help=_HELP)
    parser.set_defaults(func=_run)
