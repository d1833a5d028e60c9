"""Leader epochs of Kafka partitions: what Metadata reports and what requests are checked by.

A partition's leader epoch is its segment's container's
(``broker.cluster.leader_epochs``): it grows each time the container gets a
new owner in a cluster (failover, graceful handover, rebalancing) and never
goes back. A standalone leads every partition for ever: its epoch is 0
(restarting it moves no leadership, and Folio never truncates acknowledged
data, so nothing a client holds is ever invalidated).

Requests carrying ``current_leader_epoch`` (Fetch v9+, ListOffsets v4+,
OffsetForLeaderEpoch v2+) are checked as Kafka's broker checks them
(``epoch_error``): -1 is no check; older than the partition's epoch:
FENCED_LEADER_EPOCH (the client's metadata is stale: it refreshes it); newer:
UNKNOWN_LEADER_EPOCH (this broker's view is behind: the client retries). While
this broker knows no epoch for the partition (its owner is publishing one, or
none is known), nothing is checked: the request goes on and meets ownership's
own refusal (NOT_LEADER_OR_FOLLOWER) if this broker does not lead.

Record batches are stamped with the epoch they are written in
(``broker.kafka.blocks.block_of_batch`` and ``with_leader_epoch``): bytes
12..15 of the batch, outside its CRC, which Kafka's broker sets the same way
on append. Consumers remember the epoch of the last
batch they read and ask OffsetForLeaderEpoch with it after a leader change;
where each epoch started is kept with the segment
(``broker.segments.epoch_history``), so that epoch's end is answered exactly.
"""

from __future__ import annotations

from typing import Final

from kio.schema.errors import ErrorCode

from broker.kafka.nodes import ClusterNodes
from broker.segments.names import make_segment_name

__all__ = ["NO_EPOCH", "STANDALONE_EPOCH", "epoch_error", "leader_epoch", "segment_epoch"]

#: Kafka's "no epoch": a request's ``current_leader_epoch`` of -1 asks for no check.
NO_EPOCH: Final = -1
#: The epoch of every partition of a standalone.
STANDALONE_EPOCH: Final = 0


def segment_epoch(nodes: ClusterNodes | None, segment: str) -> int:
    """The leader epoch of ``segment`` as this broker knows it now; -1 while unknown."""
    if nodes is None:
        return STANDALONE_EPOCH
    return nodes.leader_epoch_of(segment)


def leader_epoch(nodes: ClusterNodes | None, topic: str, partition: int) -> int:
    """The leader epoch of ``topic``'s partition (``segment_epoch``); -1 while unknown."""
    return segment_epoch(nodes, make_segment_name(topic, partition))


def epoch_error(nodes: ClusterNodes | None, topic: str, partition: int,
                current_leader_epoch: int) -> ErrorCode:
    """The error of a request naming ``current_leader_epoch`` for the partition (module doc)."""
    if current_leader_epoch == NO_EPOCH or partition < 0:
        return ErrorCode.none
    epoch = leader_epoch(nodes, topic, partition)
    if epoch < 0:
        return ErrorCode.none
    if current_leader_epoch < epoch:
        return ErrorCode.fenced_leader_epoch
    if current_leader_epoch > epoch:
        return ErrorCode.unknown_leader_epoch
    return ErrorCode.none

