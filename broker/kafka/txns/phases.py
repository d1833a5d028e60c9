"""Where a transactional id is in its life, read from its record and the coordinator's state.

The transaction states ``producers`` tells apart (decided to commit or abort,
markers still being written, offsets not yet stable), and the questions
asked of every id at once: which partitions of a group hold transactional
offsets not yet stable (``pending_partitions``), which ids expired
(``expired``: ``transactional.id.expiration.ms``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from broker.kafka.consumer_groups.offsets import TopicPartition
from broker.kafka.txns.records import TxnProducer
from broker.txn.coordinator import TxnState, TxnStatus
from txnbuffer.api import TxnId

__all__ = ["ABORTED", "COMMITTED", "FINISHING", "UNSTABLE", "StateOf", "StatusOf", "expired",
           "pending_partitions"]

COMMITTED = frozenset({TxnState.COMMITTING, TxnState.COMMITTED})
ABORTED = frozenset({TxnState.ABORTING, TxnState.ABORTED, TxnState.TIMED_OUT})
#: Decided, markers still being written: the producer's next transaction waits.
FINISHING = frozenset({TxnState.COMMITTING, TxnState.ABORTING})
#: States of a transaction whose kept offsets are not yet stable (``pending_partitions``).
UNSTABLE = frozenset({TxnState.OPEN, TxnState.COMMITTING, TxnState.COMMITTED})

#: The coordinator's state of a Folio transaction, None if it does not know it.
StateOf = Callable[[TxnId], TxnState | None]
#: Its status (with its deadline), None if the coordinator does not know it.
StatusOf = Callable[[TxnId], TxnStatus | None]
#: Ended: aborted (by its producer, a fencing or its timeout) and its markers written.
_ABORTED_ENDED = frozenset({TxnState.ABORTED, TxnState.TIMED_OUT})


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


def expired(producer: TxnProducer, status_of: StatusOf, now_ms: int,
            expiration_ms: int) -> bool:
    """Whether ``producer``'s id expired: no transaction ongoing and idle ``expiration_ms``.

    Kafka's rule (its coordinator's ``removeExpiredTransactionalIds``): only an
    id whose last transaction ended (Empty, CompleteCommit, CompleteAbort)
    expires, ``expiration_ms`` after its last update. An open transaction never
    does (its timeout aborts it first: TIMED_OUT, then its clock counts from
    that deadline), nor one being decided or whose markers or offsets are
    still being written (a committed one's offsets are driven: ``producers``).
    """
    base_ms = producer.last_update_ms
    if producer.txn_id is not None:
        status = status_of(producer.txn_id)
        if status is not None:
            if status.state not in _ABORTED_ENDED:
                return False
            base_ms = max(base_ms, status.deadline_ms)
    if producer.last_txn_id is not None:
        last = status_of(producer.last_txn_id)
        if last is not None and last.state in FINISHING:
            return False
    return now_ms - base_ms >= expiration_ms
