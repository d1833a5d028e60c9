"""Where a transactional id is in its life, read from its record and the coordinator's state.

The transaction states ``producers`` tells apart (decided to commit or abort,
markers still being written, offsets not yet stable), and the questions
asked of every id at once: which partitions of a group hold transactional
offsets not yet stable (``pending_partitions``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from broker.kafka.consumer_groups.offsets import TopicPartition
from broker.kafka.txns.records import TxnProducer
from broker.txn.coordinator import TxnState
from txnbuffer.api import TxnId

__all__ = ["ABORTED", "COMMITTED", "FINISHING", "UNSTABLE", "StateOf", "pending_partitions"]

COMMITTED = frozenset({TxnState.COMMITTING, TxnState.COMMITTED})
ABORTED = frozenset({TxnState.ABORTING, TxnState.ABORTED, TxnState.TIMED_OUT})
#: Decided, markers still being written: the producer's next transaction waits.
FINISHING = frozenset({TxnState.COMMITTING, TxnState.ABORTING})
#: States of a transaction whose kept offsets are not yet stable (``pending_partitions``).
UNSTABLE = frozenset({TxnState.OPEN, TxnState.COMMITTING, TxnState.COMMITTED})

#: The coordinator's state of a Folio transaction, None if it does not know it.
StateOf = Callable[[TxnId], TxnState | None]


def pending_partitions(producers: Iterable[TxnProducer], state_of: StateOf,
                       group_id: str) -> set[TopicPartition]:
    """Partitions of ``group_id`` with offsets waiting for a transaction's commit.

    Only transactions still undecided, being committed, or committed with
    offsets not yet written to the group (kept in the record until they
    are) count: the offsets of one aborted under its producer (its
    timeout) never become stable, and must not hold ``require_stable``
    fetches until the producer comes back.
    """
    pending: set[TopicPartition] = set()
    for producer in producers:
        if producer.txn_id is None or not producer.offsets or state_of(
                producer.txn_id) not in UNSTABLE:
            continue
        pending.update((topic, partition)
                       for (group, topic, partition) in producer.offsets if group == group_id)
    return pending
