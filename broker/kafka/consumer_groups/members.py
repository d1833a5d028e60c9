"""A consumer group and its members, what JoinGroup and SyncGroup ask and answer, the limits.

Pure data with small helpers; ``broker.kafka.consumer_groups.membership`` and its
``_rebalance`` change them (one asyncio loop: every change between two awaits is atomic).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from broker.kafka.consumer_groups.states import ConsumerGroupState, check_transition

__all__ = ["Group", "GroupConfig", "JoinRequest", "JoinResult", "Member", "SyncResult"]


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """The coordinator's limits, with Kafka's broker defaults.

    Attributes:
        min_session_timeout_ms: ``group.min.session.timeout.ms``.
        max_session_timeout_ms: ``group.max.session.timeout.ms``.
        initial_rebalance_delay_ms: ``group.initial.rebalance.delay.ms``: how
            long the first rebalance of an empty group waits for more members
            (Kafka's default is 3 s; 0 here, so a lone consumer starts at once:
            later members cause one more rebalance).
        max_group_id_bytes: longest group id (UTF-8), so a record key fits.
        max_metadata_bytes: ``offset.metadata.max.bytes``.
        offsets_retention_ms: ``offsets.retention.minutes`` in ms: how long an
            empty group's offsets are kept (``expiry``; Kafka's 7 days).
        offsets_retention_check_interval_ms: ``offsets.retention.check.interval.ms``.
    """

    min_session_timeout_ms: int = 6_000
    max_session_timeout_ms: int = 1_800_000
    initial_rebalance_delay_ms: int = 0
    max_group_id_bytes: int = 512
    max_metadata_bytes: int = 4096
    offsets_retention_ms: int = 7 * 24 * 3_600_000
    offsets_retention_check_interval_ms: int = 600_000

    def __post_init__(self) -> None:
        if not 0 < self.min_session_timeout_ms <= self.max_session_timeout_ms:
            raise ValueError("need 0 < min_session_timeout_ms <= max_session_timeout_ms")
        if self.initial_rebalance_delay_ms < 0:
            raise ValueError("initial_rebalance_delay_ms must be >= 0")
        if self.offsets_retention_ms <= 0 or self.offsets_retention_check_interval_ms <= 0:
            raise ValueError("offsets_retention_ms and its check interval must be positive")


@dataclass(frozen=True, slots=True)
class JoinRequest:
    """What a JoinGroup asks, whatever its version.

    ``skip_assignment_supported``: the request is v9+ (KIP-814), so a static
    leader back without a rebalance may be told to skip the assignment.
    """

    group_id: str
    member_id: str
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    group_instance_id: str | None
    require_known_member: bool
    skip_assignment_supported: bool = False


@dataclass(frozen=True, slots=True)
class JoinResult:
    """The answer to one JoinGroup.

    ``members`` (member id, group instance id, metadata of the chosen
    protocol) is given to the leader only, as in Kafka; ``skip_assignment``
    (v9+) tells a static leader back without a rebalance to send no assignment.
    """

    error: ErrorCode
    member_id: str = ""
    generation: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: tuple[tuple[str, str | None, bytes], ...] = ()
    skip_assignment: bool = False


@dataclass(frozen=True, slots=True)
class SyncResult:
    """The answer to one SyncGroup: the member's assignment of this generation."""

    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(eq=False)
class Member:
    """One member of a group.

    Attributes:
        member_id: given by the coordinator (``<client id>-<uuid>``; a static
            member's ``<group instance id>-<uuid>``).
        client_id: the client id of its JoinGroup.
        client_host: where it connected from ("" when unknown).
        session_timeout_ms: silence after which it is removed.
        rebalance_timeout_ms: how long a rebalance waits for it to rejoin.
        protocols: (name, metadata) in its order of preference.
        group_instance_id: its static id (KIP-345), None for a dynamic member.
        assignment: what the leader gave it in this generation.
        join_waiter: set while its JoinGroup waits for the rebalance to end.
        sync_waiter: set while its SyncGroup waits for the leader's.
        expiry: the timer that removes it after ``session_timeout_ms`` of silence.
    """

    member_id: str
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]
    group_instance_id: str | None = None
    assignment: bytes = b""
    join_waiter: asyncio.Future[JoinResult] | None = None
    sync_waiter: asyncio.Future[SyncResult] | None = None
    expiry: asyncio.TimerHandle | None = None

    def metadata_of(self, protocol: str | None) -> bytes:
        """Its metadata for ``protocol`` (b"" if it has none)."""
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""

    @property
    def waiting(self) -> bool:
        """Whether a JoinGroup or SyncGroup of it is waiting (it is alive, not silent)."""
        return ((self.join_waiter is not None and not self.join_waiter.done())
                or (self.sync_waiter is not None and not self.sync_waiter.done()))


@dataclass(eq=False)
class Group:
    """One consumer group: state, generation, protocol, leader and members.

    ``pending`` holds the member ids given out by a JoinGroup v4+ answered
    MEMBER_ID_REQUIRED (KIP-394), until the member joins with it or its
    session timeout passes; a rebalance waits for them too.
    """

    group_id: str
    state: ConsumerGroupState = ConsumerGroupState.EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    pending: dict[str, asyncio.TimerHandle] = field(default_factory=dict)
    rebalance_timer: asyncio.TimerHandle | None = None
    #: The first rebalance of an empty group is waiting its initial delay.
    delaying: bool = False
    #: When it last became Empty (wall clock, ms; Kafka's currentStateTimestamp
    #: for the Empty state), None while it is not Empty or if not known.
    empty_since_ms: int | None = None

    def move(self, target: ConsumerGroupState) -> None:
        """Change state (``ConsumerGroupStateError`` for a move the table forbids)."""
        self.state = check_transition(self.group_id, self.state, target)
        self.empty_since_ms = int(time.time() * 1000) if target is ConsumerGroupState.EMPTY \
            else None

    @property
    def is_empty(self) -> bool:
        """No member and none about to join."""
        return not self.members and not self.pending

    def candidate_protocols(self) -> set[str]:
        """The protocols every member supports."""
        sets = [{name for name, _ in member.protocols} for member in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def supports(self, protocol_type: str, protocols: tuple[tuple[str, bytes], ...]) -> bool:
        """Whether a member of ``protocol_type`` with ``protocols`` may join."""
        if not protocol_type or not protocols:
            return False
        if not self.members:
            return True  # an empty group takes any protocol, as in Kafka
        names = {name for name, _ in protocols}
        return protocol_type == self.protocol_type and bool(names & self.candidate_protocols())

    def select_protocol(self) -> str:
        """The protocol of the next generation: most members' first choice among the common ones.

        Each member votes for the first protocol of its list that every
        member supports; ties go to the name first in sort order (Kafka
        leaves them to iteration order; here it is at least deterministic).
        """
        candidates = self.candidate_protocols()
        votes: Counter[str] = Counter()
        for member in self.members.values():
            for name, _ in member.protocols:
                if name in candidates:
                    votes[name] += 1
                    break
        if not votes:  # cannot happen while joins are checked with ``supports``
            return min(candidates) if candidates else ""
        best = max(votes.values())
        return min(name for name, count in votes.items() if count == best)

    def max_rebalance_timeout_ms(self) -> int:
        """How long a rebalance may wait for the members to rejoin."""
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def member_error(self, member_id: str, group_instance_id: str | None) -> ErrorCode:
        """Kafka's ``ClassicGroup.validateMember``: NONE if ``member_id`` (as static
        ``group_instance_id``, if given) is a member; FENCED_INSTANCE_ID if the
        instance is another member id now; UNKNOWN_MEMBER_ID otherwise."""
        if group_instance_id is not None:
            current = self.member_by_instance(group_instance_id)
            if current is None:
                return ErrorCode.unknown_member_id
            if current.member_id != member_id:
                return ErrorCode.fenced_instance_id
        if member_id not in self.members:
            return ErrorCode.unknown_member_id
        return ErrorCode.none

    def member_by_instance(self, group_instance_id: str) -> Member | None:
        """The member with that static id, None if none."""
        for member in self.members.values():
            if member.group_instance_id == group_instance_id:
                return member
        return None
