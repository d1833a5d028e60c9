"""``folio broker``: the broker alone, its ledgers on ``folio bookie`` processes.

The same wiring as ``folio standalone`` (``broker.app.standalone.run_standalone``)
with a ``RemoteBookies`` instead of a bookie in process: the metadata store
under ``--data-dir``, the public gRPC API on ``--port`` and Prometheus metrics
on ``--metrics-port``. ``folio.cli`` loads ``broker_command`` through the
``folio.commands`` entry-point group. Settings are layered defaults <
environment (``FOLIO_BROKER_<OPTION>``) < flags; ``--print-config`` shows them.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import typing
from collections.abc import Mapping
from typing import Any

from broker.app.standalone_cli import _HELP as STANDALONE_HELP
from broker.app.standalone_cli import resolve_standalone_config
from broker.broker_config import RemoteBookies
from broker.standalone_config import StandaloneConfig
from ledger.cli import setup_logging
from ledger.config import Durability

__all__ = ["broker_command", "resolve_broker_settings"]

ENV_PREFIX = "FOLIO_BROKER_"

_HELP = {
    **STANDALONE_HELP,
    "data_dir": "directory of the metadata store, created if missing (default ./folio-data)",
    "bookies": "the bookies (folio bookie processes), host:port comma-separated (required)",
    "ensemble_size": "bookies each ledger is striped over (default 1)",
    "write_quorum": "copies of each entry (default 1)",
    "ack_quorum": "copies durable before an append is acknowledged (default 1)",
}


def resolve_broker_settings(
    args: argparse.Namespace, environ: Mapping[str, str]
) -> tuple[StandaloneConfig, RemoteBookies]:
    """Defaults < ``environ`` < ``args``. Raises ``ValueError`` naming the bad setting."""
    config = resolve_standalone_config(args, environ, ENV_PREFIX)
    values: dict[str, Any] = {}
    for name, kind in typing.get_type_hints(RemoteBookies).items():
        value = getattr(args, name)
        raw = environ.get(ENV_PREFIX + name.upper())
        if value is None and raw:
            try:
                value = kind(raw)
            except ValueError as error:
                raise ValueError(f"{ENV_PREFIX}{name.upper()}={raw!r}: {error}") from None
        if value is not None:
            values[name] = value
    if not values.get("bookies"):
        raise ValueError(f"--bookies (or {ENV_PREFIX}BOOKIES) is required")
    return config, RemoteBookies(**values)


def _run(args: argparse.Namespace) -> int:
    try:
        config, remote = resolve_broker_settings(args, os.environ)
    except ValueError as error:
        print(f"folio broker: error: {error}", file=sys.stderr, flush=True)
        return 2
    if args.print_config:
        settings = {**dataclasses.asdict(config), **dataclasses.asdict(remote)}
        del settings["durability"]  # the bookies' setting, not the broker's
        print(json.dumps(settings, indent=2, default=str))
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
        f"{ENV_PREFIX}BOOKIES); flags win.",
    )
    for config_class in (StandaloneConfig, RemoteBookies):
        hints = typing.get_type_hints(config_class)
        for field in dataclasses.fields(config_class):
            if hints[field.name] is Durability:
                continue
            parser.add_argument("--" + field.name.replace("_", "-"), type=hints[field.name],
                                metavar=field.name.upper(), help=_HELP.get(field.name))
    parser.add_argument("--print-config", action="store_true",
                        help="print the resulting settings as JSON and exit")
    parser.set_defaults(func=_run)
