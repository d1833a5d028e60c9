"""``folio broker --metadata-url zk://...``: the broker as a member of a cluster on ZooKeeper.

The same broker as ``folio broker --bookies`` (``standalone.serve_ledgers``),
but:

- every piece of metadata (ledgers, topics, segments, reader groups, the
  transaction log's system topics) lives in ZooKeeper under the URL's chroot
  (``ZooKeeperMetadataStore``): nothing is kept on the broker's disk, and
  ``--data-dir`` is not used;
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

ZooKeeper is touched at start, at ledger creation, rollover, seal and other
metadata changes, never per append.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import time

from broker.app.cluster_ownership import ClusterOwnership
from broker.app.standalone import serve_ledgers, serve_until_signal, set_running
from broker.broker_config import BookieSecurity, BrokerConfig, PeerSettings
from ledger.client.registry_directory import RegistryBookieDirectory
from ledger.config import check_quorums
from ledger.errors import MetadataError
from ledger.metadata.cluster_config import ClusterConfig
from ledger.metadata.cluster_layout import (
    ClusterLayout,
    Registration,
    broker_path,
    read_layout,
)
from ledger.metadata.registration import EphemeralRegistration
from ledger.metadata.zookeeper_store import ZooKeeperMetadataStore

__all__ = ["BOOKIE_WAIT_S", "run_cluster_broker"]

log = logging.getLogger(__name__)

_PROG = "folio broker"
#: How long a starting broker waits for E bookies to register.
BOOKIE_WAIT_S = 60.0


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
    set_running(_PROG, f"metadata {cluster.url()}")
    return asyncio.run(serve_until_signal(
        lambda stop: _serve(config, cluster, quorum_overrides,
                            bookie_security or BookieSecurity(), peers or PeerSettings(),
                            stop)))


def _quorums(layout: ClusterLayout, overrides: dict[str, int]) -> dict[str, int]:
    quorums = {"ensemble_size": layout.ensemble_size, "write_quorum": layout.write_quorum,
               "ack_quorum": layout.ack_quorum, **overrides}
    check_quorums(quorums["ensemble_size"], quorums["write_quorum"], quorums["ack_quorum"])
    return quorums


async def _wait_for_bookies(directory: RegistryBookieDirectory, count: int,
                            store: ZooKeeperMetadataStore) -> str | None:
    deadline = time.monotonic() + BOOKIE_WAIT_S
    while len(directory.available_bookies()) < count:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return (f"{len(directory.available_bookies())} bookies registered in {store.url}, "
                    f"ledgers need {count} (ensemble_size): start more `folio bookie "
                    f"--metadata-url {store.url}`")
        log.info("waiting for %d bookies to register (%d so far)", count,
                 len(directory.available_bookies()))
        directory.changed.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(directory.changed.wait(), min(remaining, 5.0))
    return None


async def _serve(config: BrokerConfig, cluster: ClusterConfig, overrides: dict[str, int],
                 security: BookieSecurity, peers: PeerSettings, stop: asyncio.Event) -> int:
    try:
        # Checked before ZooKeeper is touched: a bad file is the operator's to fix.
        connect = security.connector()
        peer_security = peers.security(config)
    except ValueError as error:
        return _fail(str(error))
    if config.token_auth and not peer_security.token_file:
        log.warning("tokens are checked but no --peer-token-file is given: the other brokers "
                    "will refuse this broker's internal calls (transactions across brokers "
                    "fail)")
    try:
        store = await ZooKeeperMetadataStore.connect(
            cluster.url(), session_timeout_ms=cluster.metadata_session_timeout_ms)
    except MetadataError as error:
        return _fail(str(error))
    registration: EphemeralRegistration | None = None
    try:
        try:
            layout = await read_layout(store)
            quorums = _quorums(layout, overrides)
        except (MetadataError, ValueError) as error:
            return _fail(str(error))
        # The same factory as --bookies: every bookie found gets the TLS and token.
        directory = RegistryBookieDirectory(store, connect=connect)
        try:
            await directory.start()
            failure = await _wait_for_bookies(directory, quorums["ensemble_size"], store)
        except MetadataError as error:
            failure = f"cannot read the live bookies: {error}"
        if failure is not None:
            await directory.close()
            return _fail(failure)

        async def on_serving(port: int) -> str | None:
            nonlocal registration
            address = cluster.address(config.host, port)
            record = Registration(address=address, started_at_ms=int(time.time() * 1000))
            registration = EphemeralRegistration(
                store, broker_path(address), record.encode(),
                takeover_timeout_ms=2 * cluster.metadata_session_timeout_ms + 5_000)
            try:
                await registration.start()
            except MetadataError as error:
                return f"cannot register as {address}: {error}"
            await ownership.start(address)
            set_running(_PROG, f"metadata {store.url}, registered as {address}, "
                               f"E={quorums['ensemble_size']} Qw={quorums['write_quorum']} "
                               f"Qa={quorums['ack_quorum']}")
            return None

        async def on_stopping() -> None:
            # Unregistered first: clients and other brokers see it leave at once.
            if registration is not None:
                await registration.close()

        # Containers: served only while owned (broker.app.cluster_ownership).
        ownership = ClusterOwnership(store, layout.container_count,
                                     cluster.metadata_session_timeout_ms, peer_security)
        return await serve_ledgers(config, store, directory, quorums, stop,
                                   on_serving=on_serving, on_stopping=on_stopping,
                                   ownership=ownership)
    finally:
        if registration is not None:
            await registration.close()
        await store.close()
        log.info("%s stopped", _PROG)
