"""Kafka consumer groups as the gRPC API shows them beside reader groups (``folio group``).

Read, and reset or deleted while they have no member (Kafka's rule).

The contract between the ``ReaderGroups`` servicer and the Kafka listener's
group coordinator (``broker.kafka.consumer_groups.report``), kept here so the
gRPC side never imports the Kafka front end (nor its wire library, kio: a
broker without a Kafka port does not load it). The Kafka listener starts
after the gRPC server: ``KafkaGroupsSlot`` is filled when it has started
and emptied when it stops; while empty there are no Kafka groups to show.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol

from broker.errors import ReaderGroupNotFoundError

__all__ = ["KafkaGroupDetail", "KafkaGroupListing", "KafkaGroupMember", "KafkaGroups",
           "KafkaGroupsSlot", "KafkaPartitionLag", "OffsetReset", "ResetTo",
           "kafka_group_not_found"]

#: Where a reset moves each partition (``ResetKafkaGroupRequest.To``, kafka-consumer-groups'
#: --to-earliest, --to-latest, --to-offset, --shift-by, --to-datetime, --to-current).
ResetTo = Literal["earliest", "latest", "offset", "shift", "timestamp", "current", "offsets"]


def kafka_group_not_found(group: str) -> ReaderGroupNotFoundError:
    """No Kafka consumer group ``group``: NOT_FOUND as a reader group's, context kind "kafka"."""
    return ReaderGroupNotFoundError(group, kind="kafka")


@dataclass(frozen=True, slots=True)
class KafkaGroupListing:
    """One Kafka group in a listing: its state name (Kafka's), protocol type, member count."""

    name: str
    state: str
    protocol_type: str
    member_count: int


@dataclass(frozen=True, slots=True)
class KafkaGroupMember:
    """A member: ids, client id and host ("" unknown), its assigned (topic, partition)s."""

    member_id: str
    group_instance_id: str
    client_id: str
    client_host: str
    assigned: tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class KafkaPartitionLag:
    """A partition of a group: committed offset, end offset and lag (-1: unknown)."""

    topic: str
    partition: int
    committed_offset: int
    end_offset: int
    member_id: str = ""
    metadata: str = ""
    #: A share group's partition: its lag as counted by the share partition (records
    #: from its start offset to the end not yet acknowledged or archived); None: others.
    share_lag: int | None = None

    @property
    def lag(self) -> int:
        """``end_offset - committed_offset`` (at least 0), or ``share_lag`` when given;
        -1 when either offset is unknown."""
        if self.committed_offset < 0 or self.end_offset < 0:
            return -1
        if self.share_lag is not None:
            return self.share_lag
        return max(0, self.end_offset - self.committed_offset)


@dataclass(frozen=True, slots=True)
class KafkaGroupDetail:
    """A Kafka group described: state, protocol, generation, members, partitions."""

    name: str
    state: str
    protocol_type: str
    protocol: str
    generation: int
    members: tuple[KafkaGroupMember, ...]
    partitions: tuple[KafkaPartitionLag, ...]
    #: A reset's answer only: each partition's new offset (``committed_offset``).
    reset: tuple[KafkaPartitionLag, ...] = ()

    @property
    def lag(self) -> int:
        """The sum of the partitions' known lags."""
        return sum(p.lag for p in self.partitions if p.lag > 0)


@dataclass(frozen=True, slots=True)
class OffsetReset:
    """A reset of a Kafka group's offsets (``ResetKafkaGroupRequest``, decoded).

    ``topics``: every partition of these; ``partitions``: these (topic,
    partition)s besides; both empty: every topic the group committed.
    ``value``: the offset (``offset``), the shift (``shift``) or the time
    in ms (``timestamp``). ``offsets``: (topic, partition, offset) each
    (``offsets``). ``dry_run``: compute, write nothing.
    """

    to: ResetTo
    topics: tuple[str, ...] = ()
    partitions: tuple[tuple[str, int], ...] = ()
    value: int = 0
    offsets: tuple[tuple[str, int, int], ...] = ()
    dry_run: bool = False

    @property
    def names_partitions(self) -> bool:
        """Whether it names what to reset (else: every topic the group committed)."""
        return bool(self.topics or self.partitions or self.offsets)


class KafkaGroups(Protocol):
    """The Kafka groups of this broker's listener, read-only."""

    def listing(self) -> tuple[list[KafkaGroupListing], bool]:
        """The groups this broker coordinates by name, and whether that is every group.

        From memory; never raises.
        """

    async def describe(self, name: str) -> KafkaGroupDetail:
        """The group now, with its partitions' end offsets (read from segment records).

        Raises:
            ReaderGroupNotFoundError: no such group (kind "kafka";
                ``kafka_group_not_found``), here or on a standalone.
            WrongHostError: another broker coordinates it (cluster), named
                when known; the SDK follows it.
        """

    async def delete(self, name: str) -> None:
        """Delete the group and its committed offsets (Kafka's DeleteGroups).

        Raises:
            ReaderGroupNotEmptyError: it has members (Kafka's rule).
            ReaderGroupNotFoundError, WrongHostError: as ``describe``.
            BrokerError, LedgerError: the write failed; the outcome is unknown.
        """

    async def reset(self, name: str, spec: OffsetReset) -> KafkaGroupDetail:
        """Commit each partition's new offset (``spec``); the group after, ``reset`` filled.

        With ``spec.dry_run`` nothing is written (the group as it is). Raises
        as ``delete`` (members: with ``dry_run`` too), ``TopicNotFoundError``,
        ``InvalidArgumentError`` (a partition the topic lacks, a shift with no
        committed offset); after a failed write the same reset may be asked
        again unless it is a ``shift``.
        """


@dataclass(eq=False)
class KafkaGroupsSlot:
    """Where the servicer finds the Kafka groups once the listener has started (None: none)."""

    source: KafkaGroups | None = field(default=None)
