"""``folio standalone`` whose in-process bookie fails its writes on a signal, for fault tests.

Run as ``python -m tests.support.faulty_bookie_standalone standalone ARGS``
(the ``module`` argument of ``start_standalone``): the same command and
arguments, served by the same stack (``broker.app.standalone.StandaloneLedgers``
under ``broker.app.broker_stack.add_broker``), but
the bookie's RocksDB store is a ``FaultyKV`` (``tests/support/faulty_kv.py``):
``SIGUSR1`` makes every bookie write fail as a full disk does, ``SIGHUP``
heals it. Each switch logs a line (``FAILING`` / ``HEALED``) once it is in
force, which the test waits for. So an append fails at a moment the test
chooses, deterministically, in a real process: its segment fails and is
loaded again on the next write, as after a bookie lost under a broker.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import os
import signal
import sys

from broker.app.broker_stack import Running, add_broker
from broker.app.standalone import StandaloneLedgers, add_bookie_collector
from broker.app.standalone_cli import resolve_standalone_config, standalone_command
from ledger.bookie.bookie import Bookie
from ledger.cli import setup_logging
from ledger.config import BookieConfig, Journal
from ledger.lifecycle import ComponentStack, Step, run_process
from tests.support.faulty_kv import FaultyKV

__all__ = ["FAILING", "HEALED", "main"]

log = logging.getLogger(__name__)

#: Logged once bookie writes fail (after SIGUSR1), and once they succeed again (SIGHUP).
FAILING = "faulty bookie: writes fail from now on"
HEALED = "faulty bookie: writes succeed again"


def main(argv: list[str]) -> int:
    """Parse ``standalone ARGS`` as ``folio`` does and serve with the faulty bookie."""
    parser = argparse.ArgumentParser(prog="folio")
    standalone_command(parser.add_subparsers(dest="command", required=True))
    config = resolve_standalone_config(parser.parse_args(argv), os.environ)
    setup_logging()
    os.makedirs(config.data_dir, exist_ok=True)
    faults = FaultyKV()

    def open_bookie(bookie_config: BookieConfig) -> Bookie:
        # RocksDB's own synced WAL: the faults are injected in RocksDB's writes and
        # healed in place (with the journal, a failed background write needs a restart).
        return Bookie(dataclasses.replace(bookie_config, journal=Journal.NONE),
                      open_kv=faults.open)

    def fail() -> None:
        faults.fail_now()
        log.warning(FAILING)

    def heal() -> None:
        faults.heal()
        log.warning(HEALED)

    async def install() -> None:
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGUSR1, fail)
        loop.add_signal_handler(signal.SIGHUP, heal)

    running = Running("folio standalone", f"data dir {config.data_dir} (faulty bookie)")
    stack = ComponentStack(running.command)
    stack.add(Step("fault signals", install))
    source = stack.add(StandaloneLedgers(config, open_bookie=open_bookie))
    add_bookie_collector(stack, config, source)
    broker = add_broker(stack, config, source, running, bookie_in_process=True)
    return run_process(running.command, lambda: stack, broker.ready_line)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
