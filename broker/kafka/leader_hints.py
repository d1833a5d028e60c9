"""KIP-951 leader hints: the current leader of a partition answered NOT_LEADER_OR_FOLLOWER.

A Produce (v10+) or Fetch (v16+) answer may name, for each partition it
refuses with NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH, the partition's
current leader (``current_leader``: leader id and epoch, a tagged field of the
partition) and, once per answer, the address of every leader so named
(``node_endpoints``, a tagged field of the answer). A client (librdkafka
2.5+, the Java client 3.7+) then sends the partition's next request to that
leader at once, without asking Metadata first.

The leader named is the one Metadata names (``ClusterNodes.leader_of``: the
node of the broker owning the partition's segment, from the owner cache),
with the same leader epoch (``broker.kafka.leader_epochs``), so the hint and
a Metadata answer read at the same moment never disagree. A partition is hinted only
when that leader is known and is another broker: while the owner cache knows
none (a dead broker's containers before another claims them) or still names
this broker (a container being handed over, a broker stopping), the fields
stay at their defaults, which kio does not write, and the client asks
Metadata as it would without KIP-951. A standalone (no ``nodes``) leads every
partition: nothing is ever hinted.

Clients compare leader epochs: librdkafka takes a hint whose epoch is not
below the one it holds; the Java client takes only a hint whose epoch is
above the one it holds. A partition's epoch grows each time its container
gets a new owner (docs/kafka.md, "Leader epochs"), so both follow a hint
naming a new leader at once.
"""

from __future__ import annotations

from typing import Any, Final

from kio.schema.errors import ErrorCode

from broker.kafka.leader_epochs import segment_epoch
from broker.kafka.locator import Node
from broker.kafka.messages import build, nested
from broker.kafka.nodes import ClusterNodes
from broker.segments.names import make_segment_name

__all__ = ["HINTED_CODES", "LeaderHints"]

#: The partition errors a hint goes with (Kafka's broker fills it for these two).
HINTED_CODES: Final = frozenset({ErrorCode.not_leader_or_follower,
                                 ErrorCode.fenced_leader_epoch})


class LeaderHints:
    """The hints of one answer: each refused partition's leader, and the leaders' nodes.

    Args:
        nodes: the cluster's brokers and leaders (None: a standalone, no hints).
        response_cls: the answer's kio class at the version asked.
        hinting: whether that version carries the fields (Produce v10+, Fetch v16+).
    """

    def __init__(self, nodes: ClusterNodes | None, response_cls: Any, hinting: bool) -> None:
        self._nodes = nodes if hinting else None
        self._cls = response_cls
        #: node id -> node of every leader named so far, in the order first named.
        self._named: dict[int, Node] = {}

    def current_leader(self, topic: str, partition: int, code: ErrorCode) -> dict[str, Any]:
        """The partition's ``current_leader`` field, to pass to ``build``; {}: none.

        Named only for a hinted error code, and only if its leader is known
        and is another broker (module docstring).
        """
        if self._nodes is None or code not in HINTED_CODES:
            return {}
        segment = make_segment_name(topic, partition)
        leader = self._nodes.leader_of(segment)
        if leader is None or leader.node_id == self._nodes.this_node().node_id:
            return {}
        epoch = segment_epoch(self._nodes, segment)
        self._named.setdefault(leader.node_id, leader)
        value = build(nested(self._cls, "LeaderIdAndEpoch"), leader_id=leader.node_id,
                      leader_epoch=epoch)
        return {"current_leader": value}

    def node_endpoints(self) -> dict[str, Any]:
        """The answer's ``node_endpoints`` field, to pass to ``build``; {}: none named."""
        if not self._named:
            return {}
        endpoint_cls = nested(self._cls, "NodeEndpoint")
        return {"node_endpoints": tuple(
            build(endpoint_cls, node_id=node.node_id, host=node.host, port=node.port,
                  rack=None)
            for node in self._named.values())}
