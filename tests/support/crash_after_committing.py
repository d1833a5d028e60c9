"""``folio standalone`` that dies right after a commit is decided, before any marker.

Run as ``python -m tests.support.crash_after_committing standalone ARGS`` (the
``module`` argument of ``start_standalone``): the same command and arguments,
with a ``TxnFaults`` passed in through the app wiring whose hook exits the
process at once (status 137, like a SIGKILL: no cleanup, no flush) once a
``CommitTxn``'s COMMITTING record is durable. The next start must finish
that commit. The exit lives here, in the test's own process, never in the
broker.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from broker.app.standalone_cli import run_standalone_command, standalone_command
from broker.txn.faults import TxnFaults

log = logging.getLogger(__name__)


def _die() -> None:
    log.warning("crash_after_committing: exiting after logging COMMITTING")
    os._exit(137)


def main(argv: list[str]) -> int:
    """Parse ``standalone ARGS`` as ``folio`` does and run it with the fault injected."""
    parser = argparse.ArgumentParser(prog="folio")
    standalone_command(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return run_standalone_command(args, txn_faults=TxnFaults(after_committing_logged=_die))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
