"""The broker in a cluster: who serves which segment (owners, containers, failover)."""
