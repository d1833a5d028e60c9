"""The rows of the dispatch table: every served API, gathered from the handler modules.

To serve a new API, write its handler module with a ``ROWS`` tuple and add
it to ``HANDLER_MODULES`` (consumer groups and transactions are added so).
"""

from __future__ import annotations

from broker.kafka.dispatch import Api, DispatchTable
from broker.kafka.handlers import (
    acls,
    alter_configs,
    api_versions,
    client_quotas,
    cluster_admin,
    configs,
    consumer_protocol,
    delegation_tokens,
    fetch,
    find_coordinator,
    group_admin,
    group_membership,
    group_offsets,
    leader_epoch_offsets,
    leaders_admin,
    list_offsets,
    metadata,
    offset_delete,
    partitions_admin,
    produce,
    producer_id,
    sasl,
    scram_users,
    share_fetch,
    share_membership,
    share_offsets,
    topic_partitions,
    topics_admin,
    transactions,
    txn_admin,
)

__all__ = ["HANDLER_MODULES", "dispatch_table"]

HANDLER_MODULES = (
    api_versions,
    metadata,
    produce,
    fetch,
    list_offsets,
    leader_epoch_offsets,
    producer_id,
    topics_admin,
    configs,
    # Consumer groups and transactions (docs/kafka.md, "Consumer groups", "Transactions").
    find_coordinator,
    group_membership,
    group_offsets,
    group_admin,
    consumer_protocol,
    transactions,
    # Share groups (docs/kafka.md, "Share groups").
    share_membership,
    share_fetch,
    share_offsets,
    # ACL admin on Folio's grants (docs/kafka.md, "Permissions").
    acls,
    # Authentication (docs/security.md, "Kafka"): SASL and SCRAM credentials.
    sasl,
    scram_users,
    delegation_tokens,
    # Admin APIs mapped onto Folio (docs/kafka.md, "Admin APIs").
    cluster_admin,
    alter_configs,
    partitions_admin,
    offset_delete,
    txn_admin,
    leaders_admin,
    topic_partitions,
    # Client quotas (docs/kafka.md, "Client quotas").
    client_quotas,
)


def dispatch_table() -> DispatchTable:
    """The table of every row of ``HANDLER_MODULES``."""
    rows: list[Api] = [row for module in HANDLER_MODULES for row in module.ROWS]
    return DispatchTable(rows)
