"""The client's brokers: one connection pool per broker, segment owners, WrongHost.

A client is given one endpoint or a list of them (``"host1:7070,host2:7070"``);
see "Cluster" in ``proto/folio/v1/admin.proto`` for the protocol followed here.

**Bootstrap.** With one endpoint nothing is sent before the first call (as a
client of a standalone always did); the first call waits for a connection at
most ``connect_timeout_s`` (``folio._transport.connect``: a wrong endpoint
fails in seconds, saying why). With a list, the first call connects to each
endpoint in order (at most ``connect_timeout_s`` each) and asks
``ListBrokers`` until one answers (at most ``BOOTSTRAP_ATTEMPT_S`` each,
within the call's deadline); when none does it raises
``NoBrokerAvailableError`` naming every endpoint and why it failed, and the
next call tries them all again. The broker that answered carries the admin calls; the
brokers it lists, and any named later as an owner, are failover candidates
after the endpoints.

**Pools.** One ``ConnectionPool`` per broker, made on the IO thread when a
flow or a call first needs that broker; each keeps its PDP-36 bound
(``max_connections_per_endpoint``). Admin calls use the admin broker's pool.

**Addresses** are compared by :func:`address_key` (``folio._transport.addresses``
says which spellings are one broker), so ``localhost:7070`` and
``127.0.0.1:7070`` share one pool. A bootstrap broker that lists itself alone
(a standalone) is taken as the endpoint it was reached at, whatever it advertises.

**Routing.** A client starts in *single* mode: every flow, Read stream and
call goes to the admin broker, exactly as before clusters existed (no lookup,
no second pool: a standalone owns every segment, and the address it
advertises may not even be reachable from the client, behind a container's
port mapping). It switches to *cluster* mode for good when bootstrap lists
more than one broker or segment containers, or when any broker answers
WrongHost. Then each segment's flows and streams go to its owner, as last
learnt from ``Segment.owner`` (GetTopic, GetSegments, ... answers), a
WrongHost or a ``LookupSegment``; while unknown, to the admin broker (which
answers WrongHost when it is not the owner). Nothing of this is on the path
of a block: a flow picks its broker when it opens or moves.

**WrongHost.** :meth:`Brokers.follow` moves an append flow to the segment's owner
and readers call :meth:`Brokers.find_owner` (``folio._transport.moving`` says how).

IO thread only, except ``admin``, ``pool_stats`` and ``learn`` (see each).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Final, TypeVar

import grpc
from google.protobuf.message import Message
from grpc import aio

from folio._status import error_from_rpc
from folio._transport.addresses import address_key, parse_endpoints, rebind, stub_method_of
from folio._transport.append_stream import AppendFlow, AppendStream, Backoff
from folio._transport.connect import reach
from folio._transport.moving import (
    LOOKUP_ATTEMPT_S,
    MOVE_BACKOFF_MAX_S,
    QUICK_MOVE_S,
    MovingFlow,
)
from folio._transport.pool import ConnectionPool, PoolStats, ReadLease
from folio.api.v1 import admin_pb2
from folio.errors import (
    FolioError,
    FolioUnavailableError,
    InvalidArgumentError,
    LedgerUnavailableError,
    NoBrokerAvailableError,
    TimeoutError,
    WrongHostError,
)
from folio.security import PLAIN, ChannelSecurity

if TYPE_CHECKING:
    from folio._transport.io_thread import Connection

__all__ = ["BOOTSTRAP_ATTEMPT_S", "Brokers", "MovingFlow", "address_key", "parse_endpoints"]

log = logging.getLogger(__name__)

Req = TypeVar("Req", bound=Message)
Resp = TypeVar("Resp", bound=Message)

#: Longest wait for one endpoint's answer during bootstrap (a dead port answers
#: at once; a host that drops packets would otherwise take the whole deadline).
BOOTSTRAP_ATTEMPT_S: Final = 5.0
#: Retries of a read-only admin call on UNAVAILABLE with one broker (as before clusters).
_ADMIN_RETRIES: Final = 3
#: WrongHost hops one admin call follows at once; later ones wait a backoff first.
_QUICK_HOPS: Final = 2


class Brokers:
    """The brokers a client talks to (see the module docstring). Made on the IO thread."""

    def __init__(self, endpoints: Sequence[str], max_connections: int,
                 security: ChannelSecurity = PLAIN, *,
                 connect_timeout_s: float = BOOTSTRAP_ATTEMPT_S) -> None:
        """Opens the first endpoint's pool (connecting lazily).

        ``security`` (TLS and token) is the same for every broker's channels;
        ``connect_timeout_s`` bounds the first connection (see "Bootstrap").

        Raises:
            InvalidArgumentError: no endpoint, or ``max_connections`` below 1.
        """
        if not endpoints:
            raise InvalidArgumentError("a client needs at least one endpoint")
        self.endpoints = tuple(endpoints)
        self.max_connections = max_connections
        self._security = security
        self._closed = False
        self._pools: dict[str, ConnectionPool] = {}
        self._aliases: dict[str, str] = {}
        #: Where admin calls go when the admin broker fails: endpoints, then listed brokers.
        self._candidates: list[str] = list(self.endpoints)
        self._admin = self.endpoints[0]
        self.pool(self._admin)
        self._owners: dict[str, str] = {}
        self._moves: dict[str, tuple[Backoff, float]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        #: Whether segments are routed to their owners (see "Routing").
        self.cluster = False
        self._bootstrapped = len(self.endpoints) == 1
        self._connect_timeout_s = connect_timeout_s
        #: Whether a broker was ever connected to (then one that fails is restarting).
        self._reached = False

    # -- pools ------------------------------------------------------------------

    def _key(self, address: str) -> str:
        key = address_key(address)
        return self._aliases.get(key, key)

    def pool(self, address: str) -> ConnectionPool:
        """The pool of the broker at ``address``, made now if it has none.

        Raises:
            FolioUnavailableError: the client is closed.
        """
        key = self._key(address)
        pool = self._pools.get(key)
        if pool is None:
            if self._closed:
                raise FolioUnavailableError("the client's connections are closed")
            pool = self._pools[key] = ConnectionPool(address, self.max_connections,
                                                            self._security)
            # A broker named (an owner): admin calls may fail over to it (newcomers too).
            if all(self._key(known) != key for known in self._candidates):
                self._candidates.append(address)
        return pool

    @property
    def admin_address(self) -> str:
        """The broker admin calls go to now."""
        return self._admin

    @property
    def admin_pool(self) -> ConnectionPool:
        """The admin broker's pool (it always exists: any thread may read it)."""
        return self._pools[self._key(self._admin)]

    @property
    def admin(self) -> Connection:
        """The channel admin calls use now (any thread)."""
        return self.admin_pool.admin

    def pool_stats(self) -> dict[str, PoolStats]:
        """Every broker's pool, by the address it dials."""
        return {pool.endpoint: pool.stats() for pool in list(self._pools.values())}

    async def pool_stats_async(self) -> dict[str, PoolStats]:
        """``pool_stats`` as a coroutine, run on the IO thread."""
        return self.pool_stats()

    # -- owners -----------------------------------------------------------------

    def learn(self, owners: Iterable[tuple[str, str]]) -> None:
        """Records ``(segment, owner)`` pairs from an answer (empty owners are skipped)."""
        for segment, owner in owners:
            if owner:
                self._owners[segment] = owner

    def owner_of(self, segment: str) -> str | None:
        """The segment's owner as last learnt, or None."""
        return self._owners.get(segment)

    def owner_pool(self, segment: str) -> ConnectionPool:
        """The pool a flow or stream of ``segment`` goes to now (see "Routing")."""
        if self.cluster:
            owner = self._owners.get(segment)
            if owner:
                return self.pool(owner)
        return self.admin_pool

    def open_flow(self, flow: AppendFlow) -> tuple[AppendStream, int]:
        """Registers an append flow on its segment's broker (``FlowSource``)."""
        return self.owner_pool(flow.segment).open_flow(flow)

    def lease_read(self, segment: str) -> ReadLease:
        """A channel of the segment's broker for one Read stream (``ReadChannels``)."""
        return self.owner_pool(segment).lease_read()

    def moved(self, segment: str, owner: str | None) -> None:
        """A broker answered WrongHost for ``segment``: route by owner, remember this one."""
        if not self.cluster:
            log.info("a broker answered WrongHost: routing each segment to its owner")
        self.cluster = True
        if owner:
            self._owners[segment] = owner
        else:
            self._owners.pop(segment, None)

    async def find_owner(self, segment: str, deadline: float | None) -> str:
        """The segment's owner by ``LookupSegment``, asked with backoff until one is known.

        Args:
            segment: the segment.
            deadline: ``time.monotonic()`` to give up at; None to go on until cancelled.

        Raises:
            FolioUnavailableError: no owner known by ``deadline``.
            FolioError: the broker's refusal (``NoSuchSegmentError`` ...).
        """
        backoff = Backoff(MOVE_BACKOFF_MAX_S)
        request = admin_pb2.LookupSegmentRequest(segment=segment)
        while True:
            remaining = None if deadline is None else deadline - time.monotonic()
            attempt = LOOKUP_ATTEMPT_S if remaining is None else min(remaining,
                                                                      LOOKUP_ATTEMPT_S)
            why = "no broker owns it now"
            if attempt > 0:
                try:
                    answer = await self.unary(self.admin.admin.LookupSegment, request,
                                              timeout_s=attempt, retry=True)
                    if answer.owner:
                        self._owners[segment] = answer.owner
                        return answer.owner
                except (FolioUnavailableError, TimeoutError) as error:
                    why = str(error)
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise FolioUnavailableError(
                    f"no owner of segment {segment!r} found before the deadline: {why}",
                    segment=segment)
            delay = backoff.next_delay()
            log.info("segment %s: %s; looking it up again in %.2f s", segment, why, delay)
            await asyncio.sleep(delay if remaining is None else min(delay, remaining))

    # -- moving append flows ------------------------------------------------------

    def follow(self, flow: MovingFlow, stream: AppendStream | None, flow_id: int,
               error: WrongHostError, deadline: float | None) -> None:
        """Moves ``flow`` off ``stream`` to its segment's owner (see "WrongHost").

        ``deadline`` (``time.monotonic()``; None: until the flow is released)
        bounds the lookup when the answer named no owner.
        """
        if stream is not None and flow_id:
            stream.unregister(flow_id)
        segment = flow.segment
        self.moved(segment, error.owner)
        now = time.monotonic()
        backoff, last = self._moves.get(segment, (Backoff(MOVE_BACKOFF_MAX_S), 0.0))
        if now - last > QUICK_MOVE_S:
            backoff.reset()
            delay = 0.0
        else:
            delay = backoff.next_delay()
        self._moves[segment] = (backoff, now)
        owner = error.owner
        log.info("segment %s: the broker does not own it; %s", segment,
                 f"following it to {owner}" if owner else "looking up its owner")
        if owner and delay == 0.0:
            self._settle(flow)
            return
        self._spawn(self._find_then_settle(flow, owner, delay, deadline))

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _find_then_settle(self, flow: MovingFlow, owner: str | None, delay: float,
                                deadline: float | None) -> None:
        if delay:
            await asyncio.sleep(delay)
        if not owner:
            try:
                await self.find_owner(flow.segment, deadline)
            except FolioError as error:
                flow.on_move_failed(error)
                return
        self._settle(flow)

    def _settle(self, flow: MovingFlow) -> None:
        try:
            stream, flow_id = self.open_flow(flow)
        except FolioError as error:
            flow.on_move_failed(error)
            return
        if not flow.on_moved(stream, flow_id):
            stream.unregister(flow_id)  # released meanwhile

    # -- admin calls --------------------------------------------------------------

    async def bootstrap(self, deadline: float) -> None:
        """Finds a broker of the endpoint list that answers (once; see "Bootstrap").

        Raises:
            NoBrokerAvailableError: none answered.
        """
        if self._bootstrapped:
            return
        failures: list[str] = []
        for endpoint in self.endpoints:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                failures.append(f"{endpoint}: not tried before the deadline")
                continue
            try:
                await reach(self.pool(endpoint).admin,
                            min(remaining, self._connect_timeout_s), self._security.tls,
                            patient=False)
            except FolioUnavailableError as unreached:
                failures.append(f"{endpoint}: {unreached}")
                continue
            try:
                answer = await self.pool(endpoint).admin.admin.ListBrokers(
                    admin_pb2.ListBrokersRequest(),
                    timeout=min(remaining, BOOTSTRAP_ATTEMPT_S))
            except grpc.RpcError as rpc_error:
                error = error_from_rpc(rpc_error)
                if isinstance(error, FolioUnavailableError | TimeoutError):
                    failures.append(f"{endpoint}: {error}")
                    continue
                answer = admin_pb2.ListBrokersResponse()  # answered (an older broker)
            self._bootstrapped = self._reached = True
            self._admin = endpoint
            self._learn_brokers(endpoint, answer)
            for dead in self.endpoints[:self.endpoints.index(endpoint)]:
                # Their channels would keep redialling; failover makes them again.
                pool = self._pools.pop(self._key(dead), None)
                if pool is not None:
                    await pool.close()
            log.info("bootstrapped from %s (%d brokers listed)", endpoint, len(answer.brokers))
            return
        raise NoBrokerAvailableError(
            f"no broker answered at any of the {len(self.endpoints)} endpoints "
            f"{','.join(self.endpoints)}: {'; '.join(failures)}",
            endpoints=list(self.endpoints))

    def _learn_brokers(self, endpoint: str, answer: admin_pb2.ListBrokersResponse) -> None:
        addresses = [broker.address for broker in answer.brokers if broker.address]
        if len(addresses) == 1 and not answer.container_count:
            # A standalone (or a cluster of one): the broker we reached is the one
            # listed, whatever address it advertises; unless that address is
            # another endpoint of the list (then it is reachable as it is).
            key = address_key(addresses[0])
            if key not in {address_key(e) for e in self.endpoints}:
                self._aliases[key] = address_key(endpoint)
            return
        if len(addresses) > 1 or answer.container_count:
            self.cluster = True
        known = {self._key(address) for address in self._candidates}
        for address in addresses:
            if self._key(address) not in known:
                known.add(self._key(address))
                self._candidates.append(address)

    def _next_admin(self, tried: set[str]) -> str | None:
        """The next failover candidate after the admin broker not yet ``tried``."""
        start = next((i for i, a in enumerate(self._candidates)
                      if self._key(a) == self._key(self._admin)), -1)
        ordered = self._candidates[start + 1:] + self._candidates[:start + 1]
        return next((a for a in ordered if self._key(a) not in tried), None)

    async def unary(self, method: aio.UnaryUnaryMultiCallable[Req, Resp], request: Req, *,
                    timeout_s: float, retry: bool) -> Resp:
        """One unary call on the admin broker, failing over and following WrongHost.

        ``method`` is a stub method of the admin channel (``self.admin``); it
        is made again on another broker's channel to fail over or to follow
        WrongHost (GetSegmentInfo, TruncateSegment on a segment another broker
        owns; the transaction calls, to the coordinator's broker) until the
        deadline. With one known broker, UNAVAILABLE is retried a few times when
        ``retry`` (read-only calls), and any call whose connection failed (it
        answered at bootstrap, so it is restarting) until the deadline. With
        several, a broker that cannot be reached hands the call to the next
        candidate: read-only calls always, others only when gRPC says it could
        not connect (nothing was sent, so nothing is done twice).

        Raises:
            NoBrokerAvailableError: every candidate failed (several known).
            FolioError: the broker's refusal; UNAVAILABLE with one broker.
        """
        deadline = time.monotonic() + timeout_s
        if not self._bootstrapped:
            # On the first endpoint's channel, which bootstrap closes if another answers.
            found = stub_method_of(method, self.admin)
            await self.bootstrap(deadline)
            method = rebind(method, found, self.admin)
        elif not self._reached:
            await reach(self.admin, min(timeout_s, self._connect_timeout_s), self._security.tls)
            self._reached = True
        backoff = Backoff()
        moves = Backoff()  # between WrongHost hops (see _follow_wrong_host)
        retries = _ADMIN_RETRIES if retry else 0
        hops = 0
        tried: set[str] = set()
        failures: list[str] = []
        while True:
            try:
                return await method(request, timeout=max(0.001, deadline - time.monotonic()))
            except grpc.RpcError as rpc_error:
                error = error_from_rpc(rpc_error)
                unsent = "failed to connect" in (rpc_error.details() or "").lower()
            connection = self._connection_of(method)  # (only on a failure: a search)
            # After a hop: the owner named could not be reached (or is restarting).
            owner_away = bool(hops) and connection is not None and \
                connection is not self.admin and isinstance(error, FolioUnavailableError) \
                and not isinstance(error, WrongHostError | LedgerUnavailableError) \
                and (retry or unsent)
            if (isinstance(error, WrongHostError) and error.segment) or owner_away:
                hops += 1
                method = await self._follow_wrong_host(method, connection, error, hops,
                                                       moves, deadline)
                continue
            if isinstance(error, FolioUnavailableError) and connection is not None and \
                    not isinstance(error, WrongHostError | LedgerUnavailableError) and \
                    len(self._candidates) > 1 and (retry or unsent):
                tried.add(self._key(connection.endpoint))
                failures.append(f"{connection.endpoint}: {error}")
                following = self._next_admin(tried)
                if following is None or time.monotonic() >= deadline:
                    raise NoBrokerAvailableError(
                        f"no broker answered (tried {'; '.join(failures)})",
                        endpoints=list(self._candidates)) from error
                log.info("broker %s failed (%s); admin calls go to %s now",
                         connection.endpoint, error, following)
                self._admin = following
                method = rebind(method, connection, self.pool(following).admin)
                continue
            delay = backoff.next_delay()
            # A broker that answered at bootstrap and now cannot be reached is
            # restarting: nothing was sent, so any call waits for it until the
            # deadline (as Kafka clients do). Other UNAVAILABLE: a few retries.
            if not (retries > 0 or unsent) or not isinstance(error, FolioUnavailableError) or \
                    time.monotonic() + delay >= deadline:
                raise error
            retries -= 0 if unsent else 1
            log.info("admin call failed (%s); trying again in %.2f s", error, delay)
            await asyncio.sleep(delay)

    async def _follow_wrong_host(self, method: aio.UnaryUnaryMultiCallable[Req, Resp],
                                 connection: Connection | None, error: FolioError, hops: int,
                                 moves: Backoff, deadline: float,
                                 ) -> aio.UnaryUnaryMultiCallable[Req, Resp]:
        """The call's next target after a WrongHost, with backoff, until ``deadline``.

        To the owner named, else looked up; an owner named but unreachable (dead
        or stopped, named until its session expires) sends the call back to the
        admin broker. Hops after the first two wait a backoff (to 2 s). Raises
        ``error`` when ``deadline`` comes first.
        """
        delay = 0.0 if hops <= _QUICK_HOPS else moves.next_delay()
        if time.monotonic() + delay >= deadline:
            raise error
        if delay:
            log.info("call not served yet (%s); following its owner in %.2f s", error, delay)
            await asyncio.sleep(delay)
        if not isinstance(error, WrongHostError):
            return rebind(method, connection, self.admin)  # ask again who owns it
        segment = error.segment or ""
        self.moved(segment, error.owner)
        owner = error.owner or await self.find_owner(segment, deadline)
        return rebind(method, connection, self.pool(owner).admin)

    def _connection_of(self, method: object) -> Connection | None:
        """The pooled admin channel ``method`` belongs to (None: not one of ours)."""
        for pool in list(self._pools.values()):
            if stub_method_of(method, pool.admin) is not None:
                return pool.admin
        return None

    async def close(self) -> None:
        """Closes every pool and stops the lookups. Idempotent."""
        self._closed = True
        for task in list(self._tasks):
            task.cancel()
        for pool in list(self._pools.values()):
            await pool.close()
