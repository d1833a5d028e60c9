"""``folio standalone`` whose in-process bookie fails its writes on a signal, for fault tests.

Run as ``python -m tests.support.faulty_bookie_standalone standalone ARGS``
(the ``module`` argument of ``start_standalone``): the same command and
arguments, served the same way (``broker.app.standalone.serve_ledgers``), but
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
import logging
import os
import signal
import sys
from pathlib import Path

from broker.app.standalone import (
    MAX_ENTRY_BYTES,
    serve_ledgers,
    serve_until_signal,
    set_running,
)
from broker.app.standalone_cli import resolve_standalone_config, standalone_command
from broker.standalone_config import StandaloneConfig
from ledger.bookie.bookie import Bookie
from ledger.cli import setup_logging
from ledger.client.directory import BookieDirectory
from ledger.config import BookieConfig, Journal
from ledger.metadata.rocksdb_store import RocksDBMetadataStore
from tests.support.faulty_kv import FaultyKV

__all__ = ["FAILING", "HEALED", "main"]

log = logging.getLogger(__name__)

#: Logged once bookie writes fail (after SIGUSR1), and once they succeed again (SIGHUP).
FAILING = "faulty bookie: writes fail from now on"
HEALED = "faulty bookie: writes succeed again"


async def _serve(config: StandaloneConfig, stop: asyncio.Event) -> int:
    faults = FaultyKV()
    loop = asyncio.get_running_loop()

    def fail() -> None:
        faults.fail_now()
        log.warning(FAILING)

    def heal() -> None:
        faults.heal()
        log.warning(HEALED)

    loop.add_signal_handler(signal.SIGUSR1, fail)
    loop.add_signal_handler(signal.SIGHUP, heal)
    root = Path(config.data_dir)
    store = RocksDBMetadataStore(root / "metadata")
    # RocksDB's own synced WAL: the faults are injected in RocksDB's writes and
    # healed in place (with the journal, a failed background write needs a restart).
    bookie = Bookie(BookieConfig(data_dir=str(root / "bookie"), durability=config.durability,
                                 max_entry_bytes=MAX_ENTRY_BYTES, journal=Journal.NONE),
                    open_kv=faults.open)
    try:
        return await serve_ledgers(config, store, BookieDirectory([bookie]), {}, stop,
                                   bookie=bookie)
    finally:
        bookie.shutdown()
        await store.close()


def main(argv: list[str]) -> int:
    """Parse ``standalone ARGS`` as ``folio`` does and serve with the faulty bookie."""
    parser = argparse.ArgumentParser(prog="folio")
    standalone_command(parser.add_subparsers(dest="command", required=True))
    config = resolve_standalone_config(parser.parse_args(argv), os.environ)
    setup_logging()
    set_running("folio standalone", f"data dir {config.data_dir} (faulty bookie)")
    os.makedirs(config.data_dir, exist_ok=True)
    return asyncio.run(serve_until_signal(lambda stop: _serve(config, stop)))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
