"""The CLI starts fast: ``--version`` and ``--help`` import no gRPC and no server package.

Start-up time itself is measured, not asserted (docs/cli.md "Start-up");
what is asserted is what makes it: which modules ``folio --help`` loads, and
that the server commands' help shown without importing them is their own.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from importlib.metadata import entry_points

import pytest

from folio.cli import SERVER_HELP, build_parser

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
