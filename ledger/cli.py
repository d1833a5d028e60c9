"""The ledger service's ``folio`` command: ``folio bookie``.

``folio.cli`` loads ``bookie_command`` through the
``folio.commands`` entry-point group. Settings are layered defaults <
environment (``FOLIO_BOOKIE_DATA_DIR``, ``FOLIO_BOOKIE_PORT``, ... one
``FOLIO_BOOKIE_<FIELD>`` per ``BookieConfig`` field, plus ``HOST``,
``PORT`` and ``METRICS_PORT``) < flags; ``--print-config`` shows the result. The run loop is in
``ledger.bookie.main``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import sys
import typing
from collections.abc import Callable, Mapping
from typing import Any

from ledger.bookie.main import run_bookie
from ledger.config import BookieConfig, Durability

__all__ = ["bookie_command", "resolve_bookie_settings", "setup_logging"]

BOOKIE_ENV_PREFIX = "FOLIO_BOOKIE_"
DEFAULT_BOOKIE_PORT = 3181  # BookKeeper's
DEFAULT_METRICS_PORT = 8000  # BookKeeper's prometheusStatsHttpPort
DEFAULT_HOST = "127.0.0.1"

#: Help of each BookieConfig field's flag (``--data-dir`` for ``data_dir``...).
_FIELD_HELP = {
    "data_dir": "directory of the bookie's RocksDB (created if missing; required)",
    "durability": "sync: acknowledge adds once fsynced (default); async: once in the "
    "write-ahead log, not fsynced (a machine crash may lose acknowledged adds)",
    "max_entry_bytes": "refuse entries larger than this (default 5 MiB)",
    "max_batch_bytes": "cut a group commit at about this many bytes (default 64 MiB)",
    "read_max_bytes": "default byte budget of one read reply (default 4 MiB)",
}


def _port(text: str) -> int:
    port = int(text)
    if not 0 <= port <= 65535:
        raise ValueError(f"port must be in [0, 65535], got {port}")
    return port


def _layered(flag: Any, environ: Mapping[str, str], env_name: str,
             convert: Callable[[str], Any], default: Any = None) -> Any:
    """The flag if given, else the environment variable (converted), else ``default``."""
    if flag is not None:
        return flag
    raw = environ.get(env_name)
    if raw is None or raw == "":
        return default
    try:
        return convert(raw)
    except ValueError as error:
        raise ValueError(f"{env_name}={raw!r}: {error}") from None


def resolve_bookie_settings(
    args: argparse.Namespace, environ: Mapping[str, str]
) -> tuple[BookieConfig, str, int]:
    """Layer defaults < ``environ`` < ``args`` into a config, host and port.

    Raises:
        ValueError: a bad value, or no data dir, with a message for the user.
    """
    values: dict[str, Any] = {}
    for name, kind in typing.get_type_hints(BookieConfig).items():
        value = _layered(getattr(args, name), environ, BOOKIE_ENV_PREFIX + name.upper(), kind)
        if value is not None:
            values[name] = value
    if not values.get("data_dir"):
        raise ValueError(f"--data-dir (or {BOOKIE_ENV_PREFIX}DATA_DIR) is required")
    host = _layered(args.host, environ, BOOKIE_ENV_PREFIX + "HOST", str, DEFAULT_HOST)
    port = _layered(args.port, environ, BOOKIE_ENV_PREFIX + "PORT", _port, DEFAULT_BOOKIE_PORT)
    return BookieConfig(**values), host, port


def setup_logging() -> None:
    """Log INFO and up to stderr, one line per record (the server commands' log)."""
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


def _run_bookie(args: argparse.Namespace) -> int:
    try:
        config, host, port = resolve_bookie_settings(args, os.environ)
        metrics_port = _layered(args.metrics_port, os.environ, BOOKIE_ENV_PREFIX + "METRICS_PORT",
                                _port, DEFAULT_METRICS_PORT)
    except ValueError as error:
        print(f"folio bookie: error: {error}", file=sys.stderr)
        return 2
    if args.print_config:
        print(json.dumps({**dataclasses.asdict(config), "host": host, "port": port,
                          "metrics_port": metrics_port}, indent=2))
        return 0
    setup_logging()

    def announce(bound: int, metrics_bound: int | None) -> str:
        return (f"folio bookie listening on {host}:{bound} "
                f"(data dir {config.data_dir}, durability {config.durability.value}, "
                f"metrics on http://{host}:{metrics_bound}/metrics)")

    return run_bookie(config, host, port, prog="folio bookie", announce=announce,
                      metrics_port=metrics_port)


def bookie_command(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``folio bookie``: one bookie serving the ``folio.ledger.v1.Bookie`` gRPC service."""
    parser = subparsers.add_parser(
        "bookie",
        help="run one bookie of the ledger service (cluster mode)",
        description="Run one bookie: a RocksDB store of ledger entries served over gRPC "
        "(folio.ledger.v1.Bookie, with health checking and reflection) and Prometheus "
        "metrics on /metrics of the metrics port. Once it serves, "
        "it prints one line 'folio bookie listening on HOST:PORT (...)' to stdout. "
        "SIGTERM or SIGINT stop it cleanly. Every option can also be set by an "
        f"environment variable {BOOKIE_ENV_PREFIX}<OPTION> (e.g. "
        f"{BOOKIE_ENV_PREFIX}DATA_DIR); flags win.",
    )
    hints = typing.get_type_hints(BookieConfig)
    for field in dataclasses.fields(BookieConfig):
        flag = "--" + field.name.replace("_", "-")
        kind = hints[field.name]
        if kind is Durability:
            parser.add_argument(flag, type=Durability, choices=list(Durability),
                                metavar="{sync,async}", help=_FIELD_HELP.get(field.name))
        else:
            parser.add_argument(flag, type=kind, metavar=field.name.upper(),
                                help=_FIELD_HELP.get(field.name))
    parser.add_argument("--host", help=f"address to listen on (default {DEFAULT_HOST})")
    parser.add_argument("--port", type=_port, help="port to listen on, 0 for any free one "
                        f"(default {DEFAULT_BOOKIE_PORT})")
    parser.add_argument("--metrics-port", type=_port, help="port of Prometheus metrics "
                        f"(/metrics), 0 for any free one (default {DEFAULT_METRICS_PORT})")
    parser.add_argument("--print-config", action="store_true",
                        help="print the resulting settings as JSON and exit")
    parser.set_defaults(func=_run_bookie)
