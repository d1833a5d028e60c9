"""Kafka consumer groups beside reader groups: ``Client.list_groups``, ``Client.kafka_group``.

A broker with a Kafka listener (docs/kafka.md) coordinates Kafka consumer
groups; ``folio group list`` and ``describe`` show them with reader groups,
told apart by ``kind`` (``"reader"`` or ``"kafka"``; one name may be both).
``KafkaGroup.reset`` and ``delete`` follow Kafka's rule: refused while the
group has members.

In a cluster each broker coordinates the groups of its segment containers:
``list_groups`` asks every live broker (``describe_cluster``) and merges;
``KafkaGroup`` calls are sent to the admin broker, which answers WrongHost
naming the coordinator when it is another, and the SDK follows it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

import grpc
from google.protobuf.message import Message

from folio._status import error_from_rpc
from folio._transport.addresses import address_key
from folio._unknown import settle
from folio.api.v1 import groups_pb2
from folio.errors import (
    FolioError,
    InvalidArgumentError,
    NoBrokerAvailableError,
    ReaderGroupNotFoundError,
)

if TYPE_CHECKING:
    from grpc import aio

    from folio._transport.brokers import Brokers
    from folio._transport.io_thread import Connection, IoThread
    from folio.models import ClusterInfo

__all__ = ["GroupKind", "GroupListing", "KafkaGroup", "KafkaGroupDescription",
           "KafkaGroupMember", "KafkaPartitionLag", "ResetTo", "list_groups"]

#: A group's kind: a Folio reader group or a Kafka consumer group.
GroupKind = Literal["reader", "kafka"]

#: Where ``KafkaGroup.reset`` moves each partition's committed offset.
ResetTo = Literal["earliest", "latest", "offset", "shift", "timestamp", "current"]

_TO: dict[str, groups_pb2.ResetKafkaGroupRequest.To.ValueType] = {
    "earliest": groups_pb2.ResetKafkaGroupRequest.TO_EARLIEST,
    "latest": groups_pb2.ResetKafkaGroupRequest.TO_LATEST,
    "offset": groups_pb2.ResetKafkaGroupRequest.TO_OFFSET,
    "shift": groups_pb2.ResetKafkaGroupRequest.TO_SHIFT,
    "timestamp": groups_pb2.ResetKafkaGroupRequest.TO_TIMESTAMP,
    "current": groups_pb2.ResetKafkaGroupRequest.TO_CURRENT,
}

Req = TypeVar("Req", bound=Message)
Resp = TypeVar("Resp", bound=Message)


class Client(Protocol):
    """What these calls need of the client (``folio.Client``)."""

    timeout_s: float
    _io: IoThread
    _brokers: Brokers

    @property
    def _connection(self) -> Connection: ...

    def _call(self, method: aio.UnaryUnaryMultiCallable[Req, Resp], request: Req, *,
              retry: bool = False) -> Resp: ...

    def describe_cluster(self) -> ClusterInfo: ...


@dataclass(frozen=True, slots=True)
class GroupListing:
    """A group in ``Client.list_groups``.

    Attributes:
        name: the group's name.
        kind: ``"reader"`` or ``"kafka"``.
        state: a Kafka group's state (Kafka's names: ``Empty``, ``Stable``,
            ``PreparingRebalance``, ``CompletingRebalance``); None for a
            reader group.
        member_count: a Kafka group's members; None for a reader group
            (``ReaderGroup.describe`` has them).
    """

    name: str
    kind: GroupKind
    state: str | None = None
    member_count: int | None = None


@dataclass(frozen=True, slots=True)
class KafkaGroupMember:
    """A member of a Kafka group.

    Attributes:
        member_id: the id the coordinator gave it.
        group_instance_id: its static id (``group.instance.id``), None if none.
        client_id: its client id.
        client_host: its address as the broker saw it (``"/127.0.0.1"``), None if unknown.
        assigned: its (topic, partition)s, sorted (empty while rebalancing).
    """

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str | None
    assigned: tuple[tuple[str, int], ...]

    def to_json(self) -> dict[str, Any]:
        """As a JSON object."""
        return {"member_id": self.member_id, "group_instance_id": self.group_instance_id,
                "client_id": self.client_id, "client_host": self.client_host,
                "assigned": [{"topic": t, "partition": p} for t, p in self.assigned]}


@dataclass(frozen=True, slots=True)
class KafkaPartitionLag:
    """A partition of a Kafka group.

    Attributes:
        topic, partition: which.
        committed_offset: the group's committed offset (next to read), None if none.
        end_offset: the partition's end offset (high watermark), None if unknown.
        lag: ``end_offset - committed_offset``, None if either is unknown.
        member_id: the member it is assigned to, None if none.
        metadata: the commit's metadata string.
    """

    topic: str
    partition: int
    committed_offset: int | None
    end_offset: int | None
    lag: int | None
    member_id: str | None
    metadata: str = ""

    def to_json(self) -> dict[str, Any]:
        """As a JSON object."""
        return {"topic": self.topic, "partition": self.partition,
                "committed_offset": self.committed_offset, "end_offset": self.end_offset,
                "lag": self.lag, "member_id": self.member_id, "metadata": self.metadata}


@dataclass(frozen=True, slots=True)
class KafkaGroupDescription:
    """A Kafka consumer group now (``folio group describe`` of a Kafka group).

    Attributes:
        name, state: the group's (Kafka's state names).
        protocol_type: ``"consumer"`` for Kafka consumers ("" when it only
            committed offsets).
        protocol: the assignor chosen (``"range"``, ...), "" before a rebalance.
        generation: its generation.
        members: its members.
        partitions: every partition it committed or has assigned, sorted.
    """

    name: str
    state: str
    protocol_type: str
    protocol: str
    generation: int
    members: tuple[KafkaGroupMember, ...]
    partitions: tuple[KafkaPartitionLag, ...]
    kind: GroupKind = "kafka"
    #: ``KafkaGroup.reset``'s answer only: each partition reset (or, in a dry
    #: run, that would be) with its new offset as ``committed_offset``.
    reset: tuple[KafkaPartitionLag, ...] = ()

    @property
    def lag(self) -> int:
        """The sum of the partitions' known lags."""
        return sum(p.lag or 0 for p in self.partitions)

    def to_json(self) -> dict[str, Any]:
        """As a JSON object (``folio group describe --json``)."""
        return {"name": self.name, "kind": self.kind, "state": self.state,
                "protocol_type": self.protocol_type, "protocol": self.protocol,
                "generation": self.generation, "lag": self.lag,
                "members": [m.to_json() for m in self.members],
                "partitions": [p.to_json() for p in self.partitions]}


def _known(value: int) -> int | None:
    return None if value < 0 else value


def _lag(p: groups_pb2.KafkaPartitionLag) -> KafkaPartitionLag:
    return KafkaPartitionLag(p.topic, p.partition, _known(p.committed_offset),
                             _known(p.end_offset), _known(p.lag), p.member_id or None, p.metadata)


def description_from_proto(reply: groups_pb2.KafkaGroupDescription) -> KafkaGroupDescription:
    """The SDK model of a ``KafkaGroupDescription``."""
    return KafkaGroupDescription(
        reply.name, reply.state, reply.protocol_type, reply.protocol, reply.generation,
        tuple(KafkaGroupMember(m.member_id, m.group_instance_id or None, m.client_id,
                               m.client_host or None,
                               tuple((a.topic, a.partition) for a in m.assigned))
              for m in reply.members),
        tuple(_lag(p) for p in reply.partitions), reset=tuple(_lag(p) for p in reply.reset))


def _older_broker(error: FolioError) -> bool:
    """Whether ``error`` is an older broker's UNIMPLEMENTED (it has no Kafka group calls)."""
    return type(error) is FolioError and str(error).startswith("UNIMPLEMENTED")


class KafkaGroup:
    """A Kafka consumer group by name (``Client.kafka_group``): describe, reset, delete.

    Reset and delete follow Kafka's rule: ``ReaderGroupNotEmptyError`` (its
    ``members``) while the group has members; stop its consumers first.
    """

    def __init__(self, client: Client, name: str) -> None:
        self._client = client
        self.name = name

    def _call(self, method_name: str, request: Message, *, retry: bool = False) -> Any:
        client = self._client
        try:
            return client._call(getattr(client._connection.groups, method_name), request,
                                retry=retry)
        except FolioError as error:
            if not _older_broker(error):
                raise
            raise ReaderGroupNotFoundError(
                f"Kafka consumer group {self.name!r} does not exist (the broker is too old "
                "to serve Kafka groups)", group=self.name, kind="kafka") from None

    def describe(self) -> KafkaGroupDescription:
        """The group now: state, members, assignments, committed offsets, lag.

        Raises:
            ReaderGroupNotFoundError: no such Kafka group (context kind "kafka").
        """
        reply = self._call("DescribeKafkaGroup",
                           groups_pb2.DescribeKafkaGroupRequest(name=self.name), retry=True)
        return description_from_proto(reply)

    def reset(self, to: ResetTo, topics: list[str] | None = None, *,
              value: int = 0, partitions: Sequence[tuple[str, int]] = (),
              dry_run: bool = False) -> KafkaGroupDescription:
        """Set committed offsets as kafka-consumer-groups --reset-offsets; the group after.

        ``to``: ``"earliest"`` / ``"latest"`` (each partition's start / end),
        ``"offset"`` (``value`` in every partition), ``"shift"`` (each
        committed offset moved by ``value``), ``"timestamp"`` (the first
        offset at or after ``value`` ms since the epoch; the end if none),
        ``"current"`` (as committed; the end where nothing is); each is
        brought into the partition's [start, end] as Kafka's tool does.
        ``topics``: every partition of these; ``partitions``: these (topic,
        partition)s besides; neither: every topic the group committed (a
        group without offsets needs them). ``dry_run``: nothing written, the
        group as it is. The answer's ``reset`` holds each new offset.

        A call whose outcome is unknown (a lost answer) is made again
        (``folio._unknown``; ``OutcomeUnknownError`` after 60 s): the
        offsets sent are absolute; a shift is planned first (a dry run) and
        its plan sent as absolute offsets, so it is applied once.

        Raises:
            ReaderGroupNotEmptyError: the group has members (a dry run too).
            ReaderGroupNotFoundError: no such group, and nothing named.
            TopicNotFoundError: a topic does not exist.
            InvalidArgumentError: an unknown ``to``, a partition a topic does
                not have, a shift where nothing is committed, a negative offset
                or time.
        """
        if to not in _TO:
            raise InvalidArgumentError(f"reset to one of {sorted(_TO)}, not {to!r}")
        request = groups_pb2.ResetKafkaGroupRequest(
            name=self.name, to=_TO[to], topics=topics or [],
            partitions=[groups_pb2.KafkaTopicPartition(topic=t, partition=p)
                        for t, p in partitions],
            offset=value if to == "offset" else 0, shift_by=value if to == "shift" else 0,
            timestamp_ms=value if to == "timestamp" else 0, dry_run=dry_run)
        if to == "shift" and not dry_run:
            # Not idempotent: plan it (a dry run, safe to repeat), then write the
            # plan as absolute offsets, which is (a member that joined, committed
            # and left in between is overwritten, as with Kafka's tool).
            request.dry_run = True
            planned = self._settled(request)
            request = groups_pb2.ResetKafkaGroupRequest(
                name=self.name, to=groups_pb2.ResetKafkaGroupRequest.TO_OFFSETS,
                offsets=[groups_pb2.KafkaPartitionOffset(
                    topic=p.topic, partition=p.partition, offset=p.committed_offset or 0)
                    for p in planned.reset])
        return self._settled(request)

    def _settled(self, request: groups_pb2.ResetKafkaGroupRequest) -> KafkaGroupDescription:
        return settle(f"ResetKafkaGroup {self.name}", lambda _after: description_from_proto(
            self._call("ResetKafkaGroup", request)))

    def delete(self) -> None:
        """Delete the group and its committed offsets (Kafka's DeleteGroups).

        A call whose outcome is unknown is made again; ``ReaderGroupNotFoundError``
        after it means deleted.

        Raises:
            ReaderGroupNotEmptyError: the group has members.
            ReaderGroupNotFoundError: no such group.
        """
        def attempt(after_unknown: bool) -> None:
            try:
                self._call("DeleteKafkaGroup", groups_pb2.DeleteKafkaGroupRequest(name=self.name))
            except ReaderGroupNotFoundError:
                if not after_unknown:
                    raise
        settle(f"DeleteKafkaGroup {self.name}", attempt)


def _listings(reply: groups_pb2.ListKafkaGroupsResponse) -> dict[str, GroupListing]:
    return {g.name: GroupListing(g.name, "kafka", g.state, g.member_count)
            for g in reply.groups}


def _kafka_groups(client: Client) -> dict[str, GroupListing]:
    """Every Kafka group: the admin broker's, and in a cluster every other broker's."""
    try:
        first = client._call(client._connection.groups.ListKafkaGroups,
                             groups_pb2.ListKafkaGroupsRequest(), retry=True)
    except FolioError as error:
        if not _older_broker(error):
            raise
        return {}  # an older broker: no Kafka group shown
    found = _listings(first)
    if first.complete:
        return found
    admin = address_key(client._connection.endpoint)
    failures = []
    for broker in client.describe_cluster().brokers:
        if address_key(broker.address) == admin:
            continue
        try:
            reply = client._io.run(_list_on(client, broker.address),
                                   timeout=client.timeout_s + 1.0)
        except FolioError as error:  # a broker that just left: its groups move on
            failures.append(f"{broker.address}: {error}")
            continue
        found.update(_listings(reply))
    if failures:
        raise NoBrokerAvailableError(
            "the Kafka groups of some brokers could not be listed: " + "; ".join(failures))
    return found


async def _list_on(client: Client, address: str) -> groups_pb2.ListKafkaGroupsResponse:
    """ListKafkaGroups on one broker (IO thread)."""
    stub = client._brokers.pool(address).admin.groups
    try:
        reply: groups_pb2.ListKafkaGroupsResponse = await stub.ListKafkaGroups(
            groups_pb2.ListKafkaGroupsRequest(), timeout=client.timeout_s)
    except grpc.RpcError as rpc_error:
        raise error_from_rpc(rpc_error) from None
    return reply


def list_groups(client: Client, kind: GroupKind | None = None) -> list[GroupListing]:
    """``Client.list_groups``."""
    found: list[GroupListing] = []
    if kind in (None, "reader"):
        names = client._call(client._connection.groups.ListReaderGroups,
                             groups_pb2.ListReaderGroupsRequest(), retry=True).names
        found += [GroupListing(name, "reader") for name in names]
    if kind in (None, "kafka"):
        found += _kafka_groups(client).values()
    return sorted(found, key=lambda g: (g.name, g.kind))
