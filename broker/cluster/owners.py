"""``SegmentOwners``: which broker serves a segment, as the services ask it.

The gRPC services never decide ownership themselves: they ask a
``SegmentOwners``. A standalone (and ``folio broker`` on its own metadata
store) is one broker that owns every segment: ``SingleBroker``. A cluster on
ZooKeeper answers from its segment containers (``broker.cluster`` modules
that implement the same Protocol).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

__all__ = ["BrokerInfo", "SegmentOwners", "SingleBroker"]


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """One live broker: its registration id, client address and containers."""

    id: str
    address: str
    containers: tuple[int, ...] = field(default=())


class SegmentOwners(Protocol):
    """Ownership of segments, as known to this broker now.

    Answers come from memory (no metadata store round trip): they are on the
    path of every SetupAppend and Read.
    """

    def owns(self, segment: str) -> bool:
        """Whether this broker serves ``segment`` ("<topic>/<number>") now."""
        ...

    def owner_of(self, segment: str) -> str:
        """The client address "host:port" of the segment's owner, "" when unknown."""
        ...

    async def lookup(self, segment: str) -> str:
        """``owner_of``, or when it names none, the owner read afresh ("" when unowned).

        For LookupSegment, whose callers wait for a new owner's name: memory
        may lag a failover while the ownership loop is busy.
        """
        ...

    def brokers(self) -> list[BrokerInfo]:
        """The live brokers, by id."""
        ...

    @property
    def container_count(self) -> int:
        """The cluster's number of segment containers; 0 for one broker alone."""
        ...


class SingleBroker:
    """One broker that owns every segment (standalone, or ``folio broker`` alone).

    ``address`` is set once the server is bound (port 0 is chosen then).
    """

    def __init__(self, address: str = "", broker_id: str = "standalone") -> None:
        self.address = address
        self._id = broker_id

    def owns(self, segment: str) -> bool:
        return True

    def owner_of(self, segment: str) -> str:
        return self.address

    async def lookup(self, segment: str) -> str:
        return self.address

    def brokers(self) -> list[BrokerInfo]:
        return [BrokerInfo(self._id, self.address)]

    @property
    def container_count(self) -> int:
        return 0
