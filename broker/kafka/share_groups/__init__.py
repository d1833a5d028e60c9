"""Kafka share groups (KIP-932, "queues for Kafka") on the broker.

``coordinator`` (``ShareCoordinator``) composes the parts, each owning its
state: ``membership`` (``ShareGroups``: ShareGroupHeartbeat, member epochs,
the simple assignor, session timeouts), ``sessions`` (``ShareSessions``:
the share sessions of ShareFetch and ShareAcknowledge), ``partitions``
(``SharePartitions``: acquiring, acknowledging and releasing records of a
share partition, with ``records``' state machine over offset ranges) and
``config`` (the broker's ``group.share.*`` defaults and each group's
configs). ``store`` keeps share partitions' states and group configs in the
compacted system topic ``__folio_kafka_share_state``. docs/kafka.md, "Share
groups", tells what is mapped onto what.
"""

__all__: list[str] = []
