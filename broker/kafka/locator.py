"""Which broker coordinates a consumer group or a transactional id: the cluster hook.

Kafka spreads coordinators by hashing the group id (or transactional id) to
a partition of ``__consumer_offsets`` (``__transaction_state``); whoever
leads that partition coordinates. Folio's unit of ownership is the segment
container (docs: DESIGN.md, "Cluster"): the coordinator of a key is the
broker that owns the container the key hashes to (``container_of``), so a
group's state moves with its container when brokers join or leave.

``CoordinatorLocator`` is what the handlers ask: FindCoordinator answers its
``coordinator_of``, and group and transaction requests for a key this broker
does not coordinate are answered NOT_COORDINATOR (the client looks again).
A standalone (and a broker until multi-broker ownership exists) coordinates
everything: ``LocalLocator``. A cluster plugs in a locator that maps
``container_of(key, count)`` to the container's owner.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

__all__ = ["GROUP_KEY", "TRANSACTION_KEY", "CoordinatorLocator", "LocalLocator", "Node",
           "container_of"]

#: FindCoordinator key types.
GROUP_KEY = 0
TRANSACTION_KEY = 1


@dataclass(frozen=True, slots=True)
class Node:
    """A broker as Kafka clients see it."""

    node_id: int
    host: str
    port: int


def container_of(key_type: int, key: str, container_count: int) -> int:
    """The container a group id (``key_type`` 0) or transactional id (1) belongs to.

    CRC-32 of ``"<key_type>:<key>"`` modulo the count: stable across
    processes and versions (Python's ``hash`` is salted per process).
    """
    if container_count <= 0:
        raise ValueError(f"container_count must be > 0, got {container_count}")
    return zlib.crc32(f"{key_type}:{key}".encode()) % container_count


class CoordinatorLocator(Protocol):
    """Says which broker coordinates a key."""

    def coordinator_of(self, key_type: int, key: str) -> Node | None:
        """The coordinating broker; None while it is not known (COORDINATOR_NOT_AVAILABLE)."""

    def is_local(self, key_type: int, key: str) -> bool:
        """Whether this broker coordinates ``key`` (else requests get NOT_COORDINATOR)."""


class LocalLocator:
    """This broker coordinates every key (a standalone, or a broker alone).

    ``node`` gives this broker as clients reach it (its port is known once bound).
    """

    def __init__(self, node: Callable[[], Node]) -> None:
        self._node = node

    def coordinator_of(self, key_type: int, key: str) -> Node | None:
        """This broker."""
        del key_type, key
        return self._node()

    def is_local(self, key_type: int, key: str) -> bool:
        """Always."""
        del key_type, key
        return True
