"""The ``folio`` command line.

Client commands live here (``topic``, ``produce``, ``consume``, ``perf``, each
in its own module with a ``register`` function, listed in ``CLIENT_COMMANDS``);
server commands (``bookie``, ``standalone``,
``broker``) are plugged in by the server packages through the
``folio.commands`` entry-point group, so this package imports none of them.

Start-up (docs/cli.md, "Start-up"): the parser is built from two light tables
(``CLIENT_COMMANDS``, ``SERVER_HELP``): ``folio --help`` lists every command by
name and one-line help, and only the command run has its module imported and
its own parser built. ``folio --version`` imports nothing but this module
(``folio._version``), ``folio --help`` nothing but ``argparse`` and
``folio.cli._options``: no gRPC, protobuf or ``prometheus_client``, and no
entry points are read unless the command run is not in either table. gRPC
core's own log lines (``Handshake failed`` ...) are off unless ``--verbose`` is
given or ``GRPC_VERBOSITY`` is set: the CLI's one-line errors say what failed.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from typing import Final

from folio._version import __version__

__all__ = ["main"]

#: An entry point of group ``folio.commands`` loads one of these: it adds its
#: sub-command to the parser and sets ``func`` (args -> exit code) as default.
Register = Callable[["argparse._SubParsersAction[argparse.ArgumentParser]"], None]


def _version() -> str:
    # From the source (pyproject.toml reads it there too), not importlib.metadata:
    # looking the distribution up costs more than the rest of ``folio --version``.
    return __version__


class _VersionAction(argparse.Action):
    """``--version``: the installed version, looked up only when asked for."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS,
                 default: str = argparse.SUPPRESS, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=default,
                         help=help or "show program's version number and exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        parser.exit(message=f"folio {_version()}\n")


#: The global flag that turns on the SDK's INFO logs and gRPC core's own logging.
VERBOSE_FLAG: Final = "--verbose"


def _quiet_grpc(argv: Sequence[str]) -> None:
    """Silences gRPC core's logging unless ``--verbose`` or ``GRPC_VERBOSITY`` asks for it.

    gRPC core reads ``GRPC_VERBOSITY`` when it is first imported, so this runs
    before any command module is.
    """
    if VERBOSE_FLAG in argv:  # gRPC's own default level (ERROR): handshake failures ...
        import logging  # noqa: PLC0415

        logging.basicConfig(level=logging.INFO,
                            format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    else:
        os.environ.setdefault("GRPC_VERBOSITY", "NONE")


#: Options users bring from Kafka's tools, and Folio's word for each.
_KAFKA_WORDS: Final = {"--partitions": "--segments", "--bootstrap-server": "--endpoint"}


def _command_parser(parser: argparse.ArgumentParser,
                    arguments: Sequence[str]) -> argparse.ArgumentParser:
    """The parser of the (sub-)command ``arguments`` name, so an error shows its usage."""
    current = parser
    for word in arguments:
        choices = next((action.choices for action in current._actions
                        if isinstance(action, argparse._SubParsersAction)), None)
        if not isinstance(choices, dict):
            break
        if word in choices:
            current = choices[word]
    return current


def _did_you_mean(parser: argparse.ArgumentParser, unknown: Sequence[str]) -> str:
    """``"; did you mean --segments?"`` for the first unknown option with a near one."""
    import difflib  # noqa: PLC0415

    known = [flag for action in parser._actions for flag in action.option_strings]
    for word in unknown:
        flag = word.split("=", 1)[0]
        if not flag.startswith("--"):
            continue
        ours = _KAFKA_WORDS.get(flag)
        if ours is not None and ours.split()[0] in known:
            return f"; did you mean {ours}?"
        near = difflib.get_close_matches(flag, known, n=1, cutoff=0.6)
        if near:
            return f"; did you mean {near[0]}?"
    return ""


#: The client commands in the order ``folio --help`` lists them: the module whose
#: ``register`` adds the command, and its one-line help, shown without importing
#: the module (which loads the SDK); a command's module is imported when it is
#: the one run. tests/unit/folio/cli/test_cli_startup.py holds each help to the
#: command's own.
CLIENT_COMMANDS: Final = {
    "topic": ("folio.cli.topic", "create, list, describe, scale, seal and delete topics"),
    "produce": ("folio.cli.produce", "write one event per line of stdin to a topic"),
    "consume": ("folio.cli.consume", "print a topic's events, one payload per line"),
    "perf": ("folio.cli.perf", "measure throughput and latency with generated load"),
    "group": ("folio.cli.group",
              "list, describe, reset, declare offline and delete reader groups"),
    "acl": ("folio.cli.acl", "grant, revoke and list permissions on topics and reader groups"),
}

#: One-line help of the server commands, for ``folio --help`` without importing them
#: (the server packages take most of a start-up) nor reading the entry points; each
#: command's module is loaded when it is the one run. A command of group
#: ``folio.commands`` not listed here runs, but ``folio --help`` does not list it.
#: tests/unit/folio/cli/test_cli_startup.py holds each to the command's own help,
#: and every entry point of this distribution to a row.
SERVER_HELP: Final = {
    "autorecovery": "run an auto-recovery worker on its own (cluster mode)",
    "bookie": "run one bookie of the ledger service (cluster mode)",
    "broker": "run the broker alone, its ledgers on `folio bookie` processes",
    "cluster": "initialise or describe a cluster on ZooKeeper",
    "kafka-user": "add, delete and list SCRAM users of the Kafka listener",
    "standalone": "run all of Folio in one process (what `make run` starts)",
    "token": "create JWT tokens (and HS256 secrets) for token authentication",
}


def _command_word(parser: argparse.ArgumentParser, arguments: Sequence[str]) -> str | None:
    """The command ``arguments`` run (the first word that is no global option or value)."""
    takes_value = {flag for action in parser._actions if action.nargs != 0
                   for flag in action.option_strings}
    skip = False
    for word in arguments:
        if skip:
            skip = False
        elif word.startswith("-"):
            skip = word in takes_value
        else:
            return word
    return None


def _register_client_command(commands: argparse._SubParsersAction[argparse.ArgumentParser],
                             name: str) -> None:
    register: Register = importlib.import_module(CLIENT_COMMANDS[name][0]).register
    register(commands)


def _add_server_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser],
                         chosen: str | None, load_all: bool) -> None:
    """The server commands: each listed by ``SERVER_HELP``, the one run (or all) loaded.

    The entry points are read only when a command is to be loaded: the one run
    (a server command, or one of another distribution), or all of them.
    """
    if not load_all and (chosen is None or chosen in CLIENT_COMMANDS):
        for name, text in SERVER_HELP.items():
            commands.add_parser(name, help=text)
        return
    from importlib.metadata import entry_points  # noqa: PLC0415

    points = {point.name: point for point in entry_points(group="folio.commands")}
    for name in sorted({*SERVER_HELP, *points}):
        point = points.get(name)
        if point is None:  # listed, but not installed (a broken install): say so when run
            commands.add_parser(name, help=SERVER_HELP[name])
        elif load_all or name == chosen or name not in SERVER_HELP:
            register: Register = point.load()
            register(commands)
        else:
            commands.add_parser(name, help=SERVER_HELP[name])


def build_parser(arguments: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The ``folio`` parser with every installed command.

    Given the ``arguments`` to parse, only the command they run is imported
    and has its own parser; the others are listed by name and one-line help
    (``CLIENT_COMMANDS``, ``SERVER_HELP``). Without them, every command is.
    """
    from folio.cli._options import add_global_endpoint_option  # noqa: PLC0415

    parser = argparse.ArgumentParser(
        prog="folio",
        # Sub-command flags (group reset --to) must not read as abbreviations of
        # global ones (--token).
        allow_abbrev=False,
        description="Folio: a streaming broker on BookKeeper-style ledgers. "
        "Run `folio COMMAND --help` for a command's options. --endpoint (alias "
        "--bootstrap) and --config (the client's [client] table) may be given before "
        "or after a client command; `folio --config FILE --print-config` shows the "
        "client settings that result.",
    )
    parser.add_argument("--version", action=_VersionAction)
    parser.add_argument(VERBOSE_FLAG, action="store_true",
                        help="log what the client does (INFO) and gRPC core's own errors "
                        "(handshake failures ...; quiet otherwise; GRPC_VERBOSITY and "
                        "GRPC_TRACE, when set, win)")
    add_global_endpoint_option(parser)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    load_all = arguments is None
    chosen = None if arguments is None else _command_word(parser, arguments)
    for name, (_module, text) in CLIENT_COMMANDS.items():
        if load_all or name == chosen:
            _register_client_command(commands, name)
        else:
            commands.add_parser(name, help=text)
    _add_server_commands(commands, chosen, load_all)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the process exit code."""
    arguments = sys.argv[1:] if argv is None else list(argv)
    if arguments == ["--version"]:  # without importing the commands (no gRPC)
        print(f"folio {_version()}")
        raise SystemExit(0)  # as argparse's version action does
    _quiet_grpc(arguments)
    parser = build_parser(arguments)
    args, unknown = parser.parse_known_args(arguments)
    if unknown:
        command = _command_parser(parser, arguments)
        command.error(f"unrecognized arguments: {' '.join(unknown)}"
                      f"{_did_you_mean(command, unknown)}")
    if args.print_client_config or getattr(args, "uses_client_config", False):
        from folio.cli._common import client_config  # noqa: PLC0415
        from folio.errors import InvalidArgumentError  # noqa: PLC0415

        # A bad --config file or FOLIO_CLIENT_* value is bad usage (exit 2), as
        # for the server commands; checked once here, before any connection.
        try:
            config = client_config(args)
        except InvalidArgumentError as error:
            parser.error(str(error))
        if args.print_client_config:
            print(config.to_toml(), end="")
            return 0
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        result: int = func(args)
    except BrokenPipeError:
        # The reader of stdout went away (`folio topic list --json | head`): not
        # an error; point stdout at /dev/null so the exit-time flush is quiet,
        # as the Python docs advise for SIGPIPE.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 0
    return result
