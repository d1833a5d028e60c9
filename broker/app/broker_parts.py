"""The broker's domain components: ledgers, topics, transactions, reader groups, grants.

Each is a ``ledger.lifecycle.Component`` of the process's stack
(``broker.app.broker_stack`` adds them in this order; they stop in reverse):

1. ``LedgerClientPart``: the ledger client on the process's store and bookies;
2. ``TopicsPart``: the topic manager (loads topics; its maintenance task);
3. ``CoordinatorPart``: the transaction coordinator, which replays the
   transaction log at start, finishing commits and aborts a crash cut short
   (a cluster broker replays only once it owns the coordinator's container);
4. ``GroupsPart``: reader groups and their liveness sweeper, which declares
   members silent for their session timeout offline;
5. ``CommitKeysPart``: idempotent commits (settled at start outside a cluster);
6. ``AclsPart``: the grants, the token checks (Folio's key, an identity
   provider's JWKS: one ``BearerTokens`` that the Kafka listener's SASL
   shares) and the gRPC interceptors that check both.

A component holds the ones below it it needs and reads what they made once
they started (``part.topics``...): before, they raise ``RuntimeError``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import grpc

from broker.app.cluster_ownership import ClusterOwnership
from broker.appends.held import MAX_TXN_BYTES
from broker.auth import AclStore, Authorizer
from broker.broker_config import BrokerConfig
from broker.groups.backlog import GroupBacklog
from broker.groups.kafka_view import KafkaGroupsSlot
from broker.groups.liveness import GroupLiveness
from broker.groups.store import ReaderGroupStore
from broker.metrics import watch_broker
from broker.system.snapshot_store import snapshot_store
from broker.topics.manager import TopicManager
from broker.txn.commit_keys import CommitKeys
from broker.txn.coordinator import TxnCoordinator
from broker.txn.faults import TxnFaults
from ledger.api import MetadataStore
from ledger.bookie.bookie import Bookie
from ledger.client.directory import BookieDirectory
from ledger.client.ledger_client import LedgerClient
from ledger.config import LedgerConfig
from ledger.lifecycle import StartError
from ledger.security.bearer import BearerTokens
from ledger.security.interceptor import AuthInterceptor
from ledger.security.jwks import JwksVerifier
from ledger.security.tokens import TokenVerifier

__all__ = ["MAX_ENTRY_BYTES", "AclsPart", "CommitKeysPart", "CoordinatorPart", "GroupsPart",
           "LedgerClientPart", "LedgerSource", "TopicsPart"]

#: Largest ledger entry: a whole transaction (``MAX_TXN_BYTES``) plus headroom.
MAX_ENTRY_BYTES = MAX_TXN_BYTES + 1024 * 1024


T = TypeVar("T")


def _started(value: T | None, what: str) -> T:
    if value is None:
        raise RuntimeError(f"{what} is not started")
    return value


class LedgerSource(Protocol):
    """Where the broker's ledgers live (a component started below the broker's)."""

    @property
    def store(self) -> MetadataStore:
        """The metadata store."""
        ...

    @property
    def directory(self) -> BookieDirectory:
        """The bookies (the ledger client closes it)."""
        ...

    @property
    def quorums(self) -> dict[str, int]:
        """``ensemble_size`` etc. of new ledgers; empty: the defaults."""
        ...

    @property
    def bookie(self) -> Bookie | None:
        """The bookie in this process, if any."""
        ...


class LedgerClientPart:
    """The ledger client; its stop closes the bookie clients (not the store or bookies)."""

    name = "ledger client"

    def __init__(self, source: LedgerSource) -> None:
        self._source = source
        self._client: LedgerClient | None = None

    @property
    def client(self) -> LedgerClient:
        return _started(self._client, self.name)

    async def start(self) -> None:
        self._client = LedgerClient(self._source.store, self._source.directory, LedgerConfig(
            max_entry_bytes=MAX_ENTRY_BYTES,
            max_add_request_bytes=max(MAX_ENTRY_BYTES, LedgerConfig.max_add_request_bytes),
            **self._source.quorums))

    async def stop(self) -> None:
        await self.client.close()


class TopicsPart:
    """The topic manager; its stop closes the topics' ledgers cleanly."""

    name = "topics"

    def __init__(self, config: BrokerConfig, source: LedgerSource, ledgers: LedgerClientPart,
                 ownership: Callable[[], ClusterOwnership] | None) -> None:
        self._config = config
        self._source = source
        self._ledgers = ledgers
        self._ownership = ownership
        self._topics: TopicManager | None = None

    @property
    def topics(self) -> TopicManager:
        return _started(self._topics, self.name)

    async def start(self) -> None:
        config = self._config
        ownership = None if self._ownership is None else self._ownership()
        topics = TopicManager(self._ledgers.client, self._source.store,
                              txn_store_factory=snapshot_store if ownership is None
                              else ownership.snapshot_store,
                              retention_interval_s=config.retention_interval_s,
                              writer_expiry_ms=config.writer_expiry_ms,
                              txn_snapshots=config.txn_snapshots(),
                              reload_fenced=ownership is not None,
                              leader_epoch_of=None if ownership is None
                              else ownership.leader_epoch_of)
        limit = topics.txn_snapshot_store().max_record_bytes
        if config.txn_snapshot_chunk_bytes > limit:
            raise StartError(f"txn_snapshot_chunk_bytes={config.txn_snapshot_chunk_bytes} "
                             f"exceeds the largest snapshot record, {limit} bytes")
        await topics.start()
        self._topics = topics

    async def stop(self) -> None:
        await self.topics.close()


class CoordinatorPart:
    """The transaction coordinator (replayed at start outside a cluster)."""

    name = "transaction coordinator"

    def __init__(self, topics: TopicsPart, faults: TxnFaults, *, in_cluster: bool) -> None:
        self._topics = topics
        self._faults = faults
        self._in_cluster = in_cluster
        self._coordinator: TxnCoordinator | None = None

    @property
    def coordinator(self) -> TxnCoordinator:
        return _started(self._coordinator, self.name)

    async def start(self) -> None:
        topics = self._topics.topics
        coordinator = TxnCoordinator(topics, faults=self._faults)
        if not self._in_cluster:
            # A cluster broker replays only once it owns the coordinator's container
            # (broker.app.cluster_ownership): a replay here would fence the log of
            # the coordinator running elsewhere.
            await coordinator.start()
        self._coordinator = coordinator
        topics.add_maintenance_hook(coordinator.tick)
        watch_broker(topics, coordinator)

    async def stop(self) -> None:
        await self.coordinator.close()


class GroupsPart:
    """Reader groups, and the sweeper that declares silent members offline."""

    name = "reader groups"

    def __init__(self, source: LedgerSource, topics: TopicsPart) -> None:
        self._source = source
        self._topics = topics
        self._groups: ReaderGroupStore | None = None
        self._liveness: GroupLiveness | None = None
        #: The Kafka listener's consumer groups, once it has started (``folio group``).
        self.kafka_groups = KafkaGroupsSlot()

    @property
    def groups(self) -> ReaderGroupStore:
        return _started(self._groups, self.name)

    @property
    def liveness(self) -> GroupLiveness:
        return _started(self._liveness, self.name)

    async def start(self) -> None:
        topics = self._topics.topics
        self._groups = ReaderGroupStore(self._source.store)
        self._liveness = GroupLiveness(self._groups)
        self._liveness.start()
        topics.add_maintenance_hook(GroupBacklog(self._groups, topics, self._liveness).update)

    async def stop(self) -> None:
        await self.liveness.close()


class CommitKeysPart:
    """Idempotent commits; outside a cluster it settles those a crash cut short at start.

    A cluster broker settles them on taking the coordinator over.
    """

    name = "commit keys"

    def __init__(self, topics: TopicsPart, coordinator: CoordinatorPart, *,
                 in_cluster: bool) -> None:
        self._topics = topics
        self._coordinator = coordinator
        self._in_cluster = in_cluster
        self._commit_keys: CommitKeys | None = None

    @property
    def commit_keys(self) -> CommitKeys:
        return _started(self._commit_keys, self.name)

    async def start(self) -> None:
        commit_keys = CommitKeys(self._topics.topics, self._coordinator.coordinator)
        if not self._in_cluster:
            await commit_keys.start()
        self._commit_keys = commit_keys

    async def stop(self) -> None:
        """Nothing to release: its records are in the topics."""


def bearer_tokens(config: BrokerConfig) -> BearerTokens | None:
    """Folio's token key and the identity provider's key set, as configured (None: neither).

    Raises ``ValueError`` for a key or CA file that does not load.
    """
    folio = (TokenVerifier.from_files(config.auth_token_secret_file,
                                      config.auth_token_public_key_file)
             if config.token_auth else None)
    oauth = config.kafka_oauth()
    external = None if oauth is None else JwksVerifier(oauth)
    return None if folio is None and external is None else BearerTokens(folio, external)


class AclsPart:
    """The grants, and with token authentication the interceptors that check them.

    ``tokens``: the one token check of the process (None: no token key, no
    JWKS): the gRPC interceptor and the Kafka listener's OAUTHBEARER and
    PLAIN use this object, so the provider's key set is fetched, cached and
    refreshed once for both ports.
    """

    name = "grants"

    def __init__(self, config: BrokerConfig, source: LedgerSource) -> None:
        self._config = config
        self._source = source
        self._acls: AclStore | None = None
        self.interceptors: list[grpc.aio.ServerInterceptor[Any, Any]] = []
        self.tokens: BearerTokens | None = None

    @property
    def acls(self) -> AclStore:
        return _started(self._acls, self.name)

    async def start(self) -> None:
        acls = AclStore(self._source.store)
        await acls.start()
        config = self._config
        try:
            self.tokens = bearer_tokens(config)
        except ValueError as error:
            await acls.close()
            raise StartError(str(error)) from None
        if config.grpc_auth:
            assert self.tokens is not None  # a key or a JWKS URL makes one
            authorizer = Authorizer(acls, config.super_user_roles())
            self.interceptors = [AuthInterceptor(self.tokens, authorize=authorizer.wrap)]
        self._acls = acls

    async def stop(self) -> None:
        await self.acls.close()
