"""The per-segment transaction buffer (Pulsar PIP-178).

Transactional entries are appended to a segment in place; a commit or abort
marker entry decides their fate. For each segment a ``TransactionBuffer``
keeps:

* the aborted transactions, ordered by the position of their abort marker
  (``AbortedTxns``), with an index by txn id for the per-entry check;
* the open transactions and the position of their first entry (``OngoingTxns``);
* ``max_read_position``: how far a ``read_committed`` reader may read — just
  before the first entry of the earliest open transaction, or the segment's
  last entry when none is open.

It snapshots itself to a compacted topic in chunks keyed ``<segment>-1 …
<segment>-end`` (``txnbuffer.snapshot`` explains the format and why every crash
window recovers correctly), recovers from the latest snapshot plus a replay of
the segment after it, and drops aborts with their ledger under retention.
It uses ledger positions and the contracts in ``txnbuffer.api``, never gRPC or
the broker.
"""

from txnbuffer.aborts import AbortedTxns
from txnbuffer.api import (
    EARLIEST,
    EntryKind,
    LoggedEntry,
    Position,
    SegmentLog,
    SnapshotPolicy,
    SnapshotStore,
    TxnId,
)
from txnbuffer.buffer import TransactionBuffer
from txnbuffer.errors import SnapshotFormatError, TxnBufferError, TxnBufferNotReadyError
from txnbuffer.ongoing import OngoingTxns
from txnbuffer.snapshot import FORMAT_VERSION

__all__ = [
    "EARLIEST",
    "FORMAT_VERSION",
    "AbortedTxns",
    "EntryKind",
    "LoggedEntry",
    "OngoingTxns",
    "Position",
    "SegmentLog",
    "SnapshotFormatError",
    "SnapshotPolicy",
    "SnapshotStore",
    "TransactionBuffer",
    "TxnBufferError",
    "TxnBufferNotReadyError",
    "TxnId",
]
