"""``folio standalone``: the whole of Folio in one process, data under one directory.

``folio broker`` runs the same wiring with the ledgers on ``folio bookie``
processes (``run_standalone(config, remote)``): no bookie in process, the
metadata store still under the data dir.

Metadata in RocksDB (``DATA_DIR/metadata``), one bookie in the same process
(``DATA_DIR/bookie``; measured faster than a bookie one loopback hop away, see
docs/ledger.md), the broker serving the public gRPC API, and Prometheus
metrics over HTTP.

A ledger entry holds up to ``MAX_ENTRY_BYTES`` (16 MiB + 1 MiB headroom for
entry and frame headers): a single-routing-key transaction of up to 16 MiB of
blocks is written as ONE entry (``broker.appends.held``).

Startup prints one line to stdout once everything serves (``folio standalone
listening on HOST:PORT ...``); scripts and tests read the port from it.

The process is a ``ledger.lifecycle.ComponentStack`` run by ``run_process``
(signals, the ready line, the SIGUSR2 stack dump): ``StandaloneLedgers`` (the
metadata store and the bookies) at the bottom, the broker's components on top
(``broker.app.broker_stack``). Shutdown (SIGTERM or SIGINT) goes outside in:
the server stops taking calls and lets streams finish what they started
(``BrokerServer.stop``), then the topics close their ledgers cleanly, then the
bookie and the metadata store close. A SIGKILL skips all of it, which is
safe: an append is acknowledged only once durable, and the next start
recovers every segment (fencing its last ledger).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path

from broker.app.broker_parts import MAX_ENTRY_BYTES
from broker.app.broker_stack import Running, add_broker
from broker.broker_config import BookieSecurity, BrokerConfig
from broker.remote_settings import RemoteBookies
from broker.standalone_config import StandaloneConfig
from broker.txn.faults import NO_TXN_FAULTS, TxnFaults
from ledger.api import MetadataStore
from ledger.bookie.bookie import Bookie
from ledger.bookie.collector import GarbageCollectionConfig, LedgerCollector
from ledger.client.directory import BookieDirectory
from ledger.components import Background, Work
from ledger.config import BookieConfig, Durability
from ledger.errors import LedgerError, StorageError
from ledger.lifecycle import ComponentStack, StartError, run_process
from ledger.metadata.stores import open_store

__all__ = ["MAX_ENTRY_BYTES", "StandaloneLedgers", "add_bookie_collector", "run_standalone",
           "standalone_running"]

log = logging.getLogger(__name__)


def _fail(command: str, message: str) -> int:
    print(f"{command}: error: {message}", file=sys.stderr, flush=True)
    return 1


def standalone_running(config: BrokerConfig, remote: RemoteBookies | None) -> Running:
    """The command and where its ledgers live, for its messages and ready line."""
    if remote is not None:
        return Running("folio broker", f"data dir {config.data_dir}, bookies {remote.bookies}")
    return Running("folio standalone",
                   f"data dir {config.data_dir}, durability {_durability(config).value}")


def run_standalone(config: BrokerConfig, remote: RemoteBookies | None = None,
                   bookie_security: BookieSecurity | None = None, *,
                   txn_faults: TxnFaults = NO_TXN_FAULTS) -> int:
    """Serve until SIGTERM or SIGINT; returns the exit code (1 with one stderr line on failure).

    With ``remote`` (``folio broker``) the ledgers are on those bookies, whose
    durability is theirs to decide, reached with ``bookie_security`` (default:
    plain text, no token); without, a bookie runs in process with
    the ``durability`` of a ``StandaloneConfig`` (``sync`` for a plain ``BrokerConfig``).
    ``txn_faults``: hooks into the coordinator's crash windows, for a test's own
    process (``broker.txn.faults``); the commands never pass any.
    """
    running = standalone_running(config, remote)
    try:
        os.makedirs(config.data_dir, exist_ok=True)
    except OSError as error:
        return _fail(running.command, f"cannot create data dir {config.data_dir}: {error}")
    stack = ComponentStack(running.command)
    source = stack.add(StandaloneLedgers(config, remote, bookie_security or BookieSecurity()))
    if remote is None:
        add_bookie_collector(stack, config, source)
    broker = add_broker(stack, config, source, running, txn_faults=txn_faults,
                        bookie_in_process=remote is None)
    return run_process(running.command, lambda: stack, broker.ready_line)


def add_bookie_collector(stack: ComponentStack, config: BrokerConfig,
                         source: StandaloneLedgers) -> None:
    """The in-process bookie's garbage collector, unless ``--no-gc``: added right after
    ``source``, so it stops before the bookie and the store it reads."""
    if isinstance(config, StandaloneConfig) and config.gc:
        stack.add(Background("the bookie's ledger garbage collector",
                             _collector(source, config.gc_interval_ms)))


def _collector(source: StandaloneLedgers, interval_ms: int) -> Work:
    """The in-process bookie's garbage collector (``ledger.bookie.collector``): a delete
    the bookie failed (its storage failing then) still removes the metadata."""
    async def collect() -> None:
        bookie = source.bookie
        if bookie is None:
            raise RuntimeError("no bookie in process")
        await LedgerCollector(bookie, bookie.bookie_id, source.store,
                              GarbageCollectionConfig(gc_interval_ms=interval_ms)).run()

    return collect


def _durability(config: BrokerConfig) -> Durability:
    return config.durability if isinstance(config, StandaloneConfig) else Durability.SYNC


class StandaloneLedgers:
    """The metadata store under the data dir, and a bookie in process or ``remote``'s.

    Opened first and closed last (the broker's ``LedgerSource``). ``open_bookie``
    opens the bookie in process from its config (a test's launcher injects
    storage faults there).
    """

    name = "metadata store and bookies"

    def __init__(self, config: BrokerConfig, remote: RemoteBookies | None = None,
                 security: BookieSecurity | None = None, *,
                 open_bookie: Callable[[BookieConfig], Bookie] = Bookie) -> None:
        self._config = config
        self._remote = remote
        self._security = security or BookieSecurity()
        self._open_bookie = open_bookie
        self._store: MetadataStore | None = None
        self._directory: BookieDirectory | None = None
        self.bookie: Bookie | None = None
        self.quorums: dict[str, int] = {}

    @property
    def store(self) -> MetadataStore:
        if self._store is None:
            raise RuntimeError("StandaloneLedgers.start first")
        return self._store

    @property
    def directory(self) -> BookieDirectory:
        if self._directory is None:
            raise RuntimeError("StandaloneLedgers.start first")
        return self._directory

    async def start(self) -> None:
        root = Path(self._config.data_dir)
        try:
            # The embedded store (rocksdb://), made on first start.
            store = await open_store(f"rocksdb://{(root / 'metadata').absolute()}", create=True)
        except LedgerError as error:
            raise StartError(f"{error} (is another folio process using {root}?)") from None
        try:
            self._directory = self._bookies(root)
        except BaseException:
            await store.close()
            raise
        self._store = store

    def _bookies(self, root: Path) -> BookieDirectory:
        remote = self._remote
        if remote is not None:
            try:
                directory = remote.directory(self._security)
            except ValueError as error:
                raise StartError(str(error)) from None
            self.quorums = {"ensemble_size": remote.ensemble_size,
                            "write_quorum": remote.write_quorum, "ack_quorum": remote.ack_quorum}
            return directory
        try:
            self.bookie = self._open_bookie(BookieConfig(
                data_dir=str(root / "bookie"), durability=_durability(self._config),
                max_entry_bytes=MAX_ENTRY_BYTES))
        except StorageError as error:
            raise StartError(f"{error} (is another folio process using {root}?)") from None
        return BookieDirectory([self.bookie])

    async def stop(self) -> None:
        # The ledger client closed the directory; the bookie and the store remain.
        if self.bookie is not None:
            self.bookie.shutdown()
        await self.store.close()
