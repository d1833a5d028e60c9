"""``folio broker --metadata-url zk://...``: the broker as a member of a cluster on ZooKeeper.

The same broker as ``folio broker --bookies`` (``broker.app.broker_stack``),
but:

- every piece of metadata (ledgers, topics, segments, reader groups, the
  transaction log's system topics) lives in ZooKeeper under the URL's chroot
  (``ledger.metadata.stores.open_store`` on the ``--metadata-url``): nothing
  is kept on the broker's disk, and ``--data-dir`` is not used;
- it refuses to start on a chroot that ``folio cluster init`` did not
  initialise, and takes the default ledger quorums (E, Qw, Qa) from the
  cluster's layout unless ``--ensemble-size`` etc. override them;
- it finds the bookies in the registry (``RegistryBookieDirectory``: live
  ones under ``/bookies/available``, watched), waiting up to
  ``BOOKIE_WAIT_S`` at start for E of them, and reaches each with the same
  TLS and token as ``--bookies`` would (``BookieSecurity.connector``);
- once its API is bound it registers ``/brokers/<advertised address>``
  (ephemeral; re-created after a session expiry) and only then prints its
  ready line; asked to stop, it unregisters first, then stops serving.

The process is ``folio broker``'s stack (``broker.app.broker_stack``) on
``ClusterLedgers`` (the metadata session, the layout, the registry of
bookies) instead of a store on disk, with two components on top:
``BrokerRegistration`` and ``ContainerBalance``. They stop first: the broker
hands its containers over while it still answers (WrongHost), within
``HANDOVER_TIMEOUT_S`` (what is not released by then goes with the session,
and the next owner fences the ledgers: docs/cluster.md, "Handover"), then
unregisters, and only then stops serving.

ZooKeeper is touched at start, at ledger creation, rollover, seal and other
metadata changes, never per append.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import time
from collections.abc import Callable

from broker.app.broker_stack import BrokerStack, Running, add_broker
from broker.app.cluster_ownership import ClusterOwnership
from broker.broker_config import BookieSecurity, BrokerConfig
from broker.cluster.layout import ClusterLayout, broker_path, read_layout
from broker.cluster.peers import PeerSecurity
from broker.remote_settings import PeerSettings
from ledger.api import BookieClient, MetadataStore
from ledger.client.directory import BookieDirectory
from ledger.client.registry_directory import RegistryBookieDirectory
from ledger.config import check_quorums
from ledger.errors import MetadataError
from ledger.lifecycle import ComponentStack, StartError, run_process
from ledger.metadata.cluster_config import ClusterConfig
from ledger.metadata.cluster_layout import Registration
from ledger.metadata.registration import EphemeralRegistration
from ledger.metadata.stores import open_store

__all__ = ["BOOKIE_WAIT_S", "HANDOVER_TIMEOUT_S", "run_cluster_broker"]

log = logging.getLogger(__name__)

_PROG = "folio broker"
#: How long a starting broker waits for E bookies to register.
BOOKIE_WAIT_S = 60.0
#: Longest a stopping cluster broker spends handing its containers over.
HANDOVER_TIMEOUT_S = 15.0


def _fail(message: str) -> int:
    print(f"{_PROG}: error: {message}", file=sys.stderr, flush=True)
    return 1


def run_cluster_broker(config: BrokerConfig, cluster: ClusterConfig,
                       quorum_overrides: dict[str, int],
                       bookie_security: BookieSecurity | None = None,
                       peers: PeerSettings | None = None) -> int:
    """Serve as a cluster member until SIGTERM or SIGINT; the exit code.

    Args:
        config: the broker's settings (``data_dir`` unused).
        cluster: the metadata URL, advertised address and session timeout.
        quorum_overrides: ``ensemble_size`` / ``write_quorum`` / ``ack_quorum``
            set explicitly, replacing the layout's defaults.
        bookie_security: TLS and token towards the bookies found in the
            registry (``--bookie-tls-*``, ``--bookie-token-file``); default:
            plain text, no token.
        peers: TLS and token towards the other brokers (``--peer-*``).
    """
    try:
        # Checked before ZooKeeper is touched: a bad file is the operator's to fix.
        connect = (bookie_security or BookieSecurity()).connector()
        peer_security = (peers or PeerSettings()).security(config)
    except ValueError as error:
        return _fail(str(error))
    if config.grpc_auth and not peer_security.token_file:
        log.warning("tokens are checked but no --peer-token-file is given: the other brokers "
                    "will refuse this broker's internal calls (transactions across brokers "
                    "fail)")
    running = Running(_PROG, f"metadata {cluster.url()}")
    stack = ComponentStack(_PROG)
    source = stack.add(ClusterLedgers(cluster, quorum_overrides, connect, peer_security))
    broker = add_broker(stack, config, source, running, ownership=lambda: source.ownership)
    registration = stack.add(BrokerRegistration(config, cluster, source, broker))
    stack.add(ContainerBalance(source, registration), stop_timeout_s=HANDOVER_TIMEOUT_S)
    return run_process(_PROG, lambda: stack, broker.ready_line)


def _quorums(layout: ClusterLayout, overrides: dict[str, int]) -> dict[str, int]:
    quorums = {"ensemble_size": layout.ensemble_size, "write_quorum": layout.write_quorum,
               "ack_quorum": layout.ack_quorum, **overrides}
    check_quorums(quorums["ensemble_size"], quorums["write_quorum"], quorums["ack_quorum"])
    return quorums


async def _wait_for_bookies(directory: RegistryBookieDirectory, count: int,
                            url: str) -> str | None:
    deadline = time.monotonic() + BOOKIE_WAIT_S
    while len(directory.available_bookies()) < count:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return (f"{len(directory.available_bookies())} bookies registered in {url}, "
                    f"ledgers need {count} (ensemble_size): start more `folio bookie "
                    f"--metadata-url {url}`")
        log.info("waiting for %d bookies to register (%d so far)", count,
                 len(directory.available_bookies()))
        directory.changed.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(directory.changed.wait(), min(remaining, 5.0))
    return None


class ClusterLedgers:
    """The metadata session, the cluster's layout and its live bookies (a ``LedgerSource``).

    Started first: refuses a chroot ``folio cluster init`` did not initialise,
    waits up to ``BOOKIE_WAIT_S`` for E bookies; closed last.
    """

    name = "cluster metadata and bookies"

    def __init__(self, cluster: ClusterConfig, overrides: dict[str, int],
                 connect: Callable[[str], BookieClient], peers: PeerSecurity) -> None:
        self._cluster = cluster
        self._overrides = overrides
        self._connect = connect
        self._peers = peers
        self._store: MetadataStore | None = None
        self._directory: RegistryBookieDirectory | None = None
        self._ownership: ClusterOwnership | None = None
        self.quorums: dict[str, int] = {}
        self.bookie = None

    @property
    def store(self) -> MetadataStore:
        if self._store is None:
            raise RuntimeError("ClusterLedgers.start first")
        return self._store

    @property
    def directory(self) -> BookieDirectory:
        if self._directory is None:
            raise RuntimeError("ClusterLedgers.start first")
        return self._directory

    @property
    def ownership(self) -> ClusterOwnership:
        """Containers: served only while owned (``broker.app.cluster_ownership``)."""
        if self._ownership is None:
            raise RuntimeError("ClusterLedgers.start first")
        return self._ownership

    async def start(self) -> None:
        cluster = self._cluster
        try:
            store = await open_store(cluster.url(),
                                     session_timeout_ms=cluster.metadata_session_timeout_ms)
        except MetadataError as error:
            raise StartError(str(error)) from None
        try:
            await self._open(store)
        except BaseException:
            await store.close()
            raise
        self._store = store

    async def _open(self, store: MetadataStore) -> None:
        try:
            layout = await read_layout(store)
            self.quorums = _quorums(layout, self._overrides)
        except (MetadataError, ValueError) as error:
            raise StartError(str(error)) from None
        # The same factory as --bookies: every bookie found gets the TLS and token.
        directory = RegistryBookieDirectory(store, connect=self._connect)
        try:
            await directory.start()
            failure = await _wait_for_bookies(directory, self.quorums["ensemble_size"],
                                              self._cluster.url())
        except MetadataError as error:
            failure = f"cannot read the live bookies: {error}"
        except BaseException:
            await directory.close()
            raise
        if failure is not None:
            await directory.close()
            raise StartError(failure)
        self._directory = directory
        self._ownership = ClusterOwnership(store, layout.container_count,
                                           self._cluster.metadata_session_timeout_ms,
                                           self._peers)

    async def stop(self) -> None:
        await self.directory.close()  # closed by the ledger client already: a no-op then
        await self.store.close()


class BrokerRegistration:
    """``/brokers/<advertised address>`` (ephemeral) once the API is bound."""

    name = "broker registration"

    def __init__(self, config: BrokerConfig, cluster: ClusterConfig, source: ClusterLedgers,
                 broker: BrokerStack) -> None:
        self._config = config
        self._cluster = cluster
        self._source = source
        self._broker = broker
        self._registration: EphemeralRegistration | None = None
        self.address = ""

    async def start(self) -> None:
        cluster, store = self._cluster, self._source.store
        address = cluster.address(self._config.host, self._broker.port)
        record = Registration(address=address, started_at_ms=int(time.time() * 1000))
        registration = EphemeralRegistration(
            store, broker_path(address), record.encode(),
            takeover_timeout_ms=2 * cluster.metadata_session_timeout_ms + 5_000)
        try:
            await registration.start()
        except MetadataError as error:
            # Not closed: the node there may be another process's (a conflict).
            raise StartError(f"cannot register as {address}: {error}") from None
        self._registration, self.address = registration, address
        quorums = self._source.quorums
        self._broker.running.where = (
            f"metadata {cluster.url()}, registered as {address}, E={quorums['ensemble_size']} "
            f"Qw={quorums['write_quorum']} Qa={quorums['ack_quorum']}")

    async def stop(self) -> None:
        # Unregistered before the server stops: clients and other brokers see it leave at once.
        if self._registration is not None:
            await self._registration.close()


class ContainerBalance:
    """This broker's share of the containers: joined once registered, handed over first."""

    name = "container hand-over"

    def __init__(self, source: ClusterLedgers, registration: BrokerRegistration) -> None:
        self._source = source
        self._registration = registration

    async def start(self) -> None:
        await self._source.ownership.start(self._registration.address)

    async def stop(self) -> None:
        # Bounded by the stack (HANDOVER_TIMEOUT_S): a hand-over stuck on the
        # metadata store must not keep the process from stopping; what is not
        # released goes with the session, and the next owner fences the ledgers.
        await self._source.ownership.leave()
