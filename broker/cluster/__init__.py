"""The broker in a cluster: who serves which segment (owners, containers, failover).

- ``owners``: the ``SegmentOwners`` seam the services ask (``SingleBroker`` alone).
- ``containers``: a segment's container (CRC-32 of its name mod the count) and
  the ownership nodes.
- ``balance``: the target assignment every broker computes alike.
- ``owner_cache``: who owns what, kept in memory by watches.
- ``zookeeper_owners``: this broker's claims, releases and session handling,
  composed of ``container_claims`` (the held and served containers and their
  nodes), ``ownership_session`` (what the session's changes do) and
  ``balance_loop`` (the member node and the steps towards the plan).
- ``session_gate``: serving, paused (connection lost: writes refused) or stopped,
  by the metadata session.
- ``owned_topics``: the services' view of the topics (WrongHost for segments
  not served here) and the handover of loaded segments.

docs/cluster.md tells the design, the failure cases and what is not done.
"""
