"""The broker's gRPC server: Admin, Append, Produce and Read, with health and reflection.

``stop`` is the graceful shutdown: health turns NOT_SERVING (load balancers
and clients stop sending), streams are told to wind down (appends already
started finish and are answered; tail reads end UNAVAILABLE), and the server
gives in-flight calls a grace period. The caller closes the topics (their
ledgers) only after that, so no acknowledged append is cut short.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import grpc
from grpc_health.v1 import health_pb2

# The asyncio health servicer (grpc_health exposes it as ``health.aio``).
from grpc_health.v1._async import HealthServicer as AsyncHealthServicer

from broker._proto.v1 import internal_pb2, kafka_internal_pb2
from broker.api import Topics
from broker.appends.held import DEFAULT_MAX_HELD_BYTES, DEFAULT_MAX_HELD_MS
from broker.auth.acl_store import AclStore
from broker.cluster.owners import SegmentOwners, SingleBroker
from broker.cluster.txn_routes import ClusterTxnRoutes
from broker.groups.kafka_view import KafkaGroupsSlot
from broker.groups.liveness import GroupLiveness
from broker.groups.store import ReaderGroupStore
from broker.services._handlers import add_servicer
from broker.services.admin import AdminServicer
from broker.services.append import AppendServicer
from broker.services.groups import ReaderGroupsServicer
from broker.services.internal import BrokerInternalServicer
from broker.services.introspection import HEALTH_SERVICE_NAME, serve_health, serve_reflection
from broker.services.kafka_internal import KafkaForwardSlot, KafkaInternalServicer
from broker.services.produce import ProduceServicer
from broker.services.read import ReadServicer
from broker.services.transactions import TransactionsServicer
from broker.txn.commit_keys import CommitKeys
from broker.txn.coordinator import TxnCoordinator
from folio.api.v1 import admin_pb2, append_pb2, groups_pb2, read_pb2, transactions_pb2
from ledger.bookie.service import host_port, listen
from ledger.security.tls import ServerTls

__all__ = ["SERVICE_NAMES", "BrokerServer", "start_broker_server"]

log = logging.getLogger(__name__)

#: Full names of the public services, as health checks and reflection know them.
SERVICE_NAMES = (
    admin_pb2.DESCRIPTOR.services_by_name["Admin"].full_name,
    append_pb2.DESCRIPTOR.services_by_name["Append"].full_name,
    append_pb2.DESCRIPTOR.services_by_name["Produce"].full_name,
    read_pb2.DESCRIPTOR.services_by_name["Read"].full_name,
    transactions_pb2.DESCRIPTOR.services_by_name["Transactions"].full_name,
    groups_pb2.DESCRIPTOR.services_by_name["ReaderGroups"].full_name,
)

_MAX_MESSAGE_BYTES = 16 * 1024 * 1024
_SERVER_OPTIONS = (
    ("grpc.max_receive_message_length", _MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", _MAX_MESSAGE_BYTES),
    # Keepalive, both ways (docs/cluster.md, "Silent brokers"). The SDK PINGs every
    # 1 s to find a stopped broker (folio._transport.liveness): accept PINGs every
    # 0.5 s without data between them and never answer them with GOAWAY
    # "too_many_pings" (0 strikes: no limit), which would cut the clients off.
    ("grpc.http2.min_ping_interval_without_data_ms", 500),
    ("grpc.http2.max_ping_strikes", 0),
    # This side PINGs its clients too, so the streams of a client that vanished
    # (held transaction blocks, reads at the tail) end within ~15 s, not hours.
    # gRPC waits ``ping_timeout_ms`` (default 1 min) for the acknowledgement.
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.keepalive_timeout_ms", 5_000),
    ("grpc.http2.ping_timeout_ms", 5_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
    # Two brokers must never share a port by accident (gRPC sets it on Linux).
    ("grpc.so_reuseport", 0),
)


@dataclass(eq=False)
class BrokerServer:
    """A started broker server and what its graceful stop needs."""

    server: grpc.aio.Server
    port: int
    health: AsyncHealthServicer
    stopping: asyncio.Event

    async def stop(self, grace_s: float) -> None:
        """Stop serving: NOT_SERVING, wind streams down, then ``grace_s`` for calls in flight."""
        for name in ("", *SERVICE_NAMES):
            await self.health.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)
        self.stopping.set()
        await self.server.stop(grace_s)


async def start_broker_server(topics: Topics, host: str = "127.0.0.1", port: int = 0, *,
                              max_held_bytes: int = DEFAULT_MAX_HELD_BYTES,
                              max_held_ms: int = DEFAULT_MAX_HELD_MS,
                              commit_keys: CommitKeys | None = None,
                              coordinator: TxnCoordinator | None = None,
                              groups: ReaderGroupStore | None = None,
                              group_liveness: GroupLiveness | None = None,
                              kafka_groups: KafkaGroupsSlot | None = None,
                              owners: SegmentOwners | None = None,
                              tls: ServerTls | None = None,
                              acls: AclStore | None = None,
                              interceptors: Sequence[grpc.aio.ServerInterceptor[Any, Any]] = (),
                              transactions_gate: Callable[[], None] | None = None,
                              txn_routes: ClusterTxnRoutes | None = None,
                              kafka_forwards: KafkaForwardSlot | None = None,
                              ) -> BrokerServer:
    """Serve ``topics`` over the public gRPC API and start.

    With ``coordinator`` (started) the ``Transactions`` service is served and
    appends may carry a txn id; without, both are refused (UNIMPLEMENTED,
    INVALID_ARGUMENT). ``commit_keys`` (started) makes commits that carry a
    commit key idempotent (``broker.txn.commit_keys``); without, they are refused.

    With ``groups`` the ``ReaderGroups`` service is served (reader group
    states by compare-and-set); without, its calls are UNIMPLEMENTED.
    ``group_liveness`` (started by the caller) declares silent members
    offline; without, heartbeats are recorded but nobody is declared offline.
    ``kafka_groups``: where the Kafka listener's consumer groups appear once
    it has started (ListKafkaGroups, DescribeKafkaGroup); without, none.

    ``owners`` says which broker serves each segment (``broker.cluster``);
    without, this broker owns every segment under the address it binds.
    ``transactions_gate`` (a cluster broker) raises ``WrongHostError`` naming
    the coordinator's broker unless the transaction coordinator runs here.
    ``txn_routes`` (a cluster broker, with ``coordinator`` and the gate):
    transactional appends go through the segment owner's participant, and
    the internal ``BrokerInternal`` service (proto/broker/v1) is served for
    the other brokers; without, appends use the coordinator in process.

    ``kafka_forwards`` (a cluster broker): the internal ``KafkaInternal``
    service is served, through the Kafka listener's handler it holds
    (``broker.services.kafka_internal``).

    ``max_held_bytes`` and ``max_held_ms`` bound the blocks of uncommitted
    transactions (see ``broker.appends.held``).

    ``tls``: serve TLS with these files (mutual when they name a CA),
    reloading them when they change. ``interceptors`` run before every call
    (``ledger.security.interceptor`` with ``broker.auth``: tokens and
    permissions). ``acls`` (started) serves the permission RPCs of Admin.

    Raises:
        OSError: the address cannot be bound (port in use, unknown host).
        TlsConfigError: a TLS file cannot be read or is not valid PEM.
    """
    stopping = asyncio.Event()
    single = SingleBroker() if owners is None else None
    server = grpc.aio.server(options=_SERVER_OPTIONS, interceptors=list(interceptors) or None)
    for service, servicer in (
        (admin_pb2.DESCRIPTOR.services_by_name["Admin"], AdminServicer(
            topics, owners if owners is not None else single, acls)),
        (append_pb2.DESCRIPTOR.services_by_name["Append"], AppendServicer(
            topics, stopping, max_held_bytes=max_held_bytes, max_held_ms=max_held_ms,
            coordinator=coordinator if txn_routes is None else txn_routes.participant)),
        (append_pb2.DESCRIPTOR.services_by_name["Produce"], ProduceServicer(topics)),
        (read_pb2.DESCRIPTOR.services_by_name["Read"], ReadServicer(topics, stopping)),
    ):
        add_servicer(server, service, servicer)
    if coordinator is not None:
        add_servicer(server, transactions_pb2.DESCRIPTOR.services_by_name["Transactions"],
                     TransactionsServicer(coordinator, commit_keys, transactions_gate))
    if txn_routes is not None and coordinator is not None and transactions_gate is not None:
        add_servicer(server, internal_pb2.DESCRIPTOR.services_by_name["BrokerInternal"],
                     BrokerInternalServicer(coordinator, transactions_gate,
                                            txn_routes.participant.write_marker,
                                            lambda: txn_routes.kafka))
    if kafka_forwards is not None:
        add_servicer(server, kafka_internal_pb2.DESCRIPTOR.services_by_name["KafkaInternal"],
                     KafkaInternalServicer(kafka_forwards))
    if groups is not None:
        add_servicer(server, groups_pb2.DESCRIPTOR.services_by_name["ReaderGroups"],
                     ReaderGroupsServicer(topics, groups, group_liveness, kafka_groups))
    health = serve_health(server)
    serve_reflection(server, (*SERVICE_NAMES, HEALTH_SERVICE_NAME))
    bound = await listen(server, host, port, tls)
    if single is not None:
        single.address = host_port(host, bound)
    for name in ("", *SERVICE_NAMES):
        await health.set(name, health_pb2.HealthCheckResponse.SERVING)
    await server.start()
    log.info("broker serving on %s", host_port(host, bound))
    return BrokerServer(server, bound, health, stopping)
