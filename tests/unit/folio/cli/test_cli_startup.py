"""The CLI starts fast: ``--version`` and ``--help`` import no gRPC and no server package.

Start-up time itself is measured, not asserted (docs/cli.md "Start-up",
``python -m bench.cli_startup``); what is asserted is what makes it: which
modules ``folio --help`` loads, in the real entry points too
(``tests.support.cli_imports``), and that the commands' help shown without importing them is
their own.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from importlib.metadata import EntryPoint, distribution, entry_points

import pytest

import folio.cli
from folio.cli import CLIENT_COMMANDS, SERVER_HELP, build_parser
from tests.support.cli_imports import ENTRY_POINTS, run_recording_imports

_HEAVY = ("grpc", "google", "broker", "ledger", "txnbuffer", "prometheus_client", "kazoo",
          "rocksdict", "folio.client", "folio.read", "folio.write", "folio.security")


def _loaded_by(*argv: str) -> list[str]:
    code = ("import sys, contextlib, io\n"
            "from folio.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    try:\n"
            f"        main({list(argv)!r})\n"
            "    except SystemExit:\n"
            "        pass\n"
            f"print(__import__('json').dumps(sorted(m for m in sys.modules if m.startswith("
            f"{_HEAVY!r}))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=True)
    loaded: list[str] = json.loads(done.stdout)
    return loaded


@pytest.mark.processes
@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["topic", "--help"],
                                  ["topic", "create", "--help"], ["group", "list", "--help"]])
def test_help_and_version_load_no_grpc_nor_server(argv: list[str]) -> None:
    assert _loaded_by(*argv) == []


@pytest.mark.processes
@pytest.mark.parametrize("entry", ENTRY_POINTS, ids=lambda entry: entry[-1])
@pytest.mark.parametrize("argv", [["--version"], ["--help"]])
def test_the_entry_points_import_no_grpc_protobuf_nor_prometheus(entry: tuple[str, ...],
                                                                argv: list[str]) -> None:
    done, modules = run_recording_imports(entry, *argv)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("folio " if argv == ["--version"] else "usage: folio")
    heavy = sorted(m for m in modules if m.split(".")[0] in ("grpc", "google", "prometheus_client"))
    assert heavy == []
    # Nor the commands' modules, the SDK's settings or the entry points' lookup.
    assert not {"folio.config", "folio.cli._common", "importlib.metadata"} & modules
    assert not {module for module, _help in CLIENT_COMMANDS.values()} & modules


@pytest.mark.processes
def test_a_client_command_loads_its_own_module_only() -> None:
    loaded_code = ("import sys, contextlib, io\n"
                   "from folio.cli import main\n"
                   "with contextlib.redirect_stdout(io.StringIO()):\n"
                   "    try:\n"
                   "        main(['topic', 'list', '--help'])\n"
                   "    except SystemExit:\n"
                   "        pass\n"
                   "print(__import__('json').dumps(sorted(sys.modules)))")
    done = subprocess.run([sys.executable, "-c", loaded_code], capture_output=True, text=True,
                          timeout=120, check=True)
    loaded = set(json.loads(done.stdout))
    assert "folio.cli.topic" in loaded
    others = {module for name, (module, _help) in CLIENT_COMMANDS.items() if name != "topic"}
    assert not others & loaded
    assert "importlib.metadata" not in loaded  # no entry points read for a client command


@pytest.mark.processes
def test_version_is_the_installed_distributions() -> None:
    done = subprocess.run([sys.executable, "-m", "folio.cli", "--version"], capture_output=True,
                          text=True, timeout=120, check=True)
    assert done.stdout == f"folio {distribution('folio').version}\n"


def test_client_help_is_each_commands_own() -> None:
    parser = build_parser()  # every command loaded
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    own = {choice.dest: choice.help for choice in subparsers._choices_actions}
    assert {name: text for name, (_module, text) in CLIENT_COMMANDS.items()} == \
        {name: own[name] for name in CLIENT_COMMANDS}
    listed = build_parser(["--help"])
    choices = next(a for a in listed._actions if isinstance(a, argparse._SubParsersAction))
    assert [c.dest for c in choices._choices_actions] == [*CLIENT_COMMANDS, *SERVER_HELP]


def test_every_server_command_of_folio_is_listed() -> None:
    ours = {point.name for point in entry_points(group="folio.commands")
            if point.dist is None or point.dist.name == "folio"}
    assert ours == set(SERVER_HELP)


def _plugin_register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    plugin = commands.add_parser("plugin-x", help="a command of another distribution")
    plugin.set_defaults(func=lambda _args: 7)


def test_a_plugin_command_not_listed_still_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    point = EntryPoint(name="plugin-x", group="folio.commands",
                       value=f"{__name__}:_plugin_register")
    monkeypatch.setattr("importlib.metadata.entry_points", lambda group: [point])
    assert folio.cli.main(["plugin-x"]) == 7


@pytest.mark.processes
def test_a_server_command_is_loaded_when_run() -> None:
    loaded = _loaded_by("token", "create", "--help")
    assert "ledger.security.cli" in loaded
    assert not any(m.startswith("broker") for m in loaded)


def test_server_help_is_each_commands_own() -> None:
    parser = build_parser()  # every command loaded
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    own = {choice.dest: choice.help for choice in subparsers._choices_actions}
    installed = {point.name for point in entry_points(group="folio.commands")}
    for name, text in SERVER_HELP.items():
        if name in installed:
            assert own[name] == text, name
