"""Kafka consumer groups on the broker: the classic rebalance protocol and committed offsets.

A ``GroupCoordinator`` serves every group this broker coordinates
(``broker.kafka.locator`` says which: all of them on a standalone). Layout:
``states`` (the group state machine as a table), ``members`` (a group and its
members, what a join or sync answers), ``membership`` (JoinGroup, SyncGroup,
Heartbeat, LeaveGroup: generations, the leader, session and rebalance
timeouts), ``offsets`` (committed offsets and group records in the compacted
system topic ``_kafka_offsets``), ``coordinator`` (offset commits and
fetches, DescribeGroups, ListGroups, loading at start). The leader member
computes the assignment (client side), as in Kafka's classic protocol.
"""

__all__: list[str] = []
