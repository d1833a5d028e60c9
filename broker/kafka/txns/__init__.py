"""Kafka transactions on Folio's transaction coordinator (``broker.txn``) and transaction buffer.

A Kafka transactional id maps onto a stable producer id, an epoch bumped by
each InitProducerId (which fences the older producer and aborts what it left
open), and at most one open Folio transaction at a time, begun by the first
AddPartitionsToTxn or AddOffsetsToTxn. Transactional batches are appended as
that Folio transaction's entries; EndTxn commits or aborts it through the
coordinator, whose markers the transaction buffer of each segment reads, so
``read_committed`` Kafka consumers and Folio readers see the same outcome.
Offsets sent with the transaction (TxnOffsetCommit) are kept pending and
written to the group's committed offsets once the commit is decided.
``producers`` holds it all; the records live in ``_kafka_txn_state``;
``answers`` says how what cannot be finished is answered; ``versions`` has
KIP-890's rules (partitions in the transaction, the epoch bumped by EndTxn
v5), ``implicit`` its checks and implicit adds wherever they are asked from;
``drives`` finishes decided transactions' records in the background. On a multi-broker
cluster ``cluster`` runs them beside Folio's transaction coordinator, with
partitions and groups on any broker (docs/kafka.md, "Clusters").
"""

__all__: list[str] = []
