"""Cluster tests: a real ZooKeeper, real bookie and broker processes (docs/cluster.md)."""
