"""Kafka consumer groups on the broker: the classic rebalance protocol and committed offsets.

A ``GroupCoordinator`` serves every group this broker coordinates
(``broker.kafka.locator`` says which: all of them on a standalone). It is
composed of parts that own their state (``coordinator`` says which calls go
where): ``_table`` (``GroupTable``: the groups by id), ``membership``
(``GroupMembership``: JoinGroup, SyncGroup, Heartbeat, LeaveGroup) with
``_rebalance`` (``Rebalancer``: generations, the leader's assignment,
session and rebalance timeouts), ``_commits`` (``OffsetCommits``: offset
commits, fetches and deletions), ``_group_records`` (``GroupRecords``:
loading at start, group records, DeleteGroups; with ``_classic_state``, the
members kept over a restart or failover), ``_listing``
(``GroupSummaries``: DescribeGroups, ListGroups). Beneath them: ``states``
(the group state machine as a table), ``members`` (a group and its members,
what a join or sync answers), ``offsets`` (committed offsets and group
records in the compacted system topic ``_kafka_offsets``); ``report`` shows
the groups to ``folio group``. The leader member computes the assignment
(client side), as in Kafka's classic protocol. Beside it, KIP-848's
consumer protocol (``modern`` with ``modern_members``, ``modern_requests``,
``modern_topics``, ``assignors``), their members kept over restarts by
``_modern_state``; ``mixed`` serves classic members inside a
consumer-protocol group and moves a group between the two kinds
(``migration``), reading and writing the consumer protocol embedded in
classic joins (``embedded``).
"""

__all__: list[str] = []
