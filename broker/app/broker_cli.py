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

from broker.app.standalone_cli import _HELP as STANDALONE_HELP
from broker.broker_config import BrokerConfig, RemoteBookies
from ledger.cli import setup_logging
from ledger.settings import Layers, add_arguments, to_toml

__all__ = ["broker_command", "resolve_broker_settings"]

COMPONENT = "broker"
ENV_PREFIX = "FOLIO_BROKER_"
_CLASSES = (BrokerConfig, RemoteBookies)

_HELP = {
    **STANDALONE_HELP,
    "data_dir": "directory of the metadata store, created if missing (default ./folio-data)",
    "bookies": "the bookies (folio bookie processes), host:port comma-separated (required)",
    "ensemble_size": "bookies each ledger is striped over (default 1)",
    "write_quorum": "copies of each entry (default 1)",
    "ack_quorum": "copies durable before an append is acknowledged (default 1)",
    "bookie_tls_ca": "PEM CA of the bookies' certificates: set, the broker talks TLS to "
    "its bookies",
    "bookie_tls_cert": "PEM client certificate for bookies that require one (mutual TLS)",
    "bookie_tls_key": "PEM private key of --bookie-tls-cert",
    "bookie_tls_server_name": "name checked in the bookies' certificates instead of their "
    "host",
    "bookie_token_file": "file with the JWT sent to bookies with token authentication "
    "(its role must be in their --super-users); re-read when it changes",
}


def resolve_broker_settings(
    args: argparse.Namespace, environ: Mapping[str, str]
) -> tuple[BrokerConfig, RemoteBookies]:
    """Defaults < ``--config`` < ``environ`` < ``args``. ``ValueError`` names a bad setting."""
    layers = Layers.from_args(COMPONENT, args, environ)
    layers.check_file_keys(_CLASSES)
    return layers.build(BrokerConfig), layers.build(RemoteBookies, required=["bookies"])


def _run(args: argparse.Namespace) -> int:
    try:
        config, remote = resolve_broker_settings(args, os.environ)
    except ValueError as error:
        print(f"folio broker: error: {error}", file=sys.stderr, flush=True)
        return 2
    if args.print_config:
        print(to_toml(COMPONENT, config, remote), end="")
        return 0
    # Imported here so `folio --help` stays fast.
    from broker.app.standalone import run_standalone  # noqa: PLC0415

    setup_logging()
    return run_standalone(config, remote)


def broker_command(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``folio broker``: the broker and its metrics, ledgers on remote bookies."""
    parser = subparsers.add_parser(
        "broker",
        help="run the broker alone, its ledgers on `folio bookie` processes",
        description="Run the broker: the public gRPC API (Admin, Append, Produce, Read, "
        "Transactions, with health checking and reflection) and Prometheus metrics, its "
        "ledgers on the bookies named by --bookies (start them with `folio bookie`; give "
        "them --max-entry-bytes 17825792 to take 16 MiB transactions) and its metadata "
        "under --data-dir. Once it serves it prints one line 'folio broker listening on "
        "HOST:PORT (...)' to stdout. SIGTERM or SIGINT stop it gracefully. Every option "
        f"can also be set by an environment variable {ENV_PREFIX}<OPTION> (e.g. "
        f"{ENV_PREFIX}BOOKIES) or in the [broker] table of a --config TOML file; flags win "
        "over the environment, which wins over the file.",
    )
    add_arguments(parser, _CLASSES, component=COMPONENT, help=_HELP)
    parser.set_defaults(func=_run)
