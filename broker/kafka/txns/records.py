"""What is kept of each Kafka transactional id, in the compacted system topic ``_kafka_txn_state``.

One record per transactional id, keyed ``t/<transactional id>``, versioned
JSON: producer id, epoch, transaction timeout, the open Folio transaction
(hex, or null), the partitions added to it (AddPartitionsToTxn, or a
Produce v12+ of transaction version 2) and the offsets sent with it
(TxnOffsetCommit) that wait for its commit, and how the last transaction
ended (its outcome and txn id; the producer id and epoch of an EndTxn v5,
whose retry is answered after the epoch bump, KIP-890).
It is written when the producer (re)initialises, when a Folio transaction
begins, when offsets are added, and when a transaction ends.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from broker.kafka.consumer_groups.offsets import CommittedOffset
from ledger.records import dump_record, load_record
from txnbuffer.api import TxnId
from txnbuffer.txn_ids import txn_id_from_hex, txn_id_hex

__all__ = ["MAX_TRANSACTIONAL_ID_BYTES", "TXN_STATE_TOPIC", "AddedPartition", "PendingOffset",
           "TxnProducer", "decode_all"]

log = logging.getLogger(__name__)

TXN_STATE_TOPIC = "_kafka_txn_state"
#: Longest transactional id (UTF-8), so its record key fits.
MAX_TRANSACTIONAL_ID_BYTES = 1000
_VERSION = 1

#: (group id, topic, partition).
PendingOffset = tuple[str, str, int]
#: (topic, partition).
AddedPartition = tuple[str, int]


@dataclass(eq=False)
class TxnProducer:
    """The state of one transactional id.

    Attributes:
        transactional_id: the producer's ``transactional.id``.
        producer_id: its stable producer id.
        epoch: its current epoch; requests with another are fenced.
        timeout_ms: the transaction timeout it asked (``transaction.timeout.ms``).
        txn_id: the open Folio transaction, None between transactions.
        offsets: offsets waiting for ``txn_id`` to commit.
        groups: groups added with AddOffsetsToTxn in this transaction.
        last_end: "commit" or "abort" once the last transaction ended (a
            retried EndTxn with the same outcome is answered success).
        last_txn_id: the Folio transaction that ended last: the next one
            begins only once its markers are all written (else
            CONCURRENT_TRANSACTIONS, which clients retry), so no partition
            owner can take a batch of the next one as the last one's.
        partitions: the partitions added to ``txn_id``: a transactional batch
            to another one is refused (KIP-890 part 1).
        ended_with: (producer id, epoch) of the EndTxn v5 that ended the last
            transaction and bumped the epoch (KIP-890 part 2): a retry of it
            carries them and is answered with the outcome; None otherwise.
        last_markers_written: the last transaction's EndTxn saw its markers
            written (a commit answers once they are; its COMMITTED record
            follows): the next one need not wait. In memory only (after a
            restart or a move the state decides).
        last_update_ms: when its record was last written (wall clock, ms;
            Kafka's txnLastUpdateTimestamp): ``transactional.id.expiration.ms``
            counts from it (``phases.expired``). Records of earlier builds
            have none: the time they are loaded.
        expired: forgotten by expiry (in memory only): a call that found it
            before must not write it again.
    """

    transactional_id: str
    producer_id: int
    epoch: int
    timeout_ms: int
    txn_id: TxnId | None = None
    offsets: dict[PendingOffset, CommittedOffset] = field(default_factory=dict)
    groups: set[str] = field(default_factory=set)
    last_end: str | None = None
    last_txn_id: TxnId | None = None
    last_markers_written: bool = False
    partitions: set[AddedPartition] = field(default_factory=set)
    ended_with: tuple[int, int] | None = None
    last_update_ms: int = 0
    expired: bool = False

    @property
    def key(self) -> str:
        """The record key."""
        return record_key(self.transactional_id)

    def encode(self) -> bytes:
        """The record's value."""
        return dump_record(_VERSION, {
            "producer_id": self.producer_id, "epoch": self.epoch,
            "timeout_ms": self.timeout_ms,
            "txn_id": None if self.txn_id is None else txn_id_hex(self.txn_id),
            "offsets": [[group, topic, partition, value.offset, value.leader_epoch,
                         value.metadata] for (group, topic, partition), value
                        in self.offsets.items()],
            "last_end": self.last_end,
            "last_txn_id": None if self.last_txn_id is None else txn_id_hex(self.last_txn_id),
            "partitions": sorted([topic, partition] for topic, partition in self.partitions),
            "ended_with": None if self.ended_with is None else list(self.ended_with),
            "updated_ms": self.last_update_ms,
        }, legacy_key="v")  # "v": for brokers of earlier builds (ledger.records)

    @staticmethod
    def decode(key: str, value: bytes) -> TxnProducer:
        """The state in a record (``ValueError``, ``KeyError``, ``TypeError`` if unreadable)."""
        if not key.startswith("t/"):
            raise ValueError("not a transactional id record")
        # Earlier builds kept the version under "v" (ledger.records).
        data = load_record(value, "transactional id record", (_VERSION,), legacy_key="v")
        txn = data.get("txn_id")
        offsets = {(str(group), str(topic), int(partition)):
                   CommittedOffset(int(offset), int(epoch), metadata)
                   for group, topic, partition, offset, epoch, metadata in data["offsets"]}
        # "last_end", "last_txn_id": absent from records of earlier builds.
        last_end = data.get("last_end")
        last_txn = data.get("last_txn_id")
        # "partitions", "ended_with": absent from records of earlier builds.
        partitions = {(str(topic), int(partition))
                      for topic, partition in data.get("partitions") or ()}
        ended = data.get("ended_with")
        return TxnProducer(key[2:], int(data["producer_id"]), int(data["epoch"]),
                           int(data["timeout_ms"]), None if txn is None else txn_id_from_hex(txn),
                           offsets, set(), last_end if last_end in ("commit", "abort") else None,
                           None if last_txn is None else txn_id_from_hex(last_txn),
                           partitions=partitions,
                           ended_with=None if ended is None else (int(ended[0]), int(ended[1])),
                           # Absent from records of earlier builds: their clock starts now.
                           last_update_ms=int(data["updated_ms"]) if "updated_ms" in data
                           else int(time.time() * 1000))


def decode_all(records: Mapping[str, bytes]) -> dict[str, TxnProducer]:
    """The states in ``records`` by transactional id; an unreadable one is logged, left out."""
    producers = {}
    for key, value in records.items():
        try:
            producer = TxnProducer.decode(key, value)
        except (ValueError, KeyError, TypeError) as error:
            log.error("kafka transactions: record %r of %s is unreadable (%s: %s); "
                      "that transactional id starts afresh", key[:128], TXN_STATE_TOPIC,
                      type(error).__name__, error)
            continue
        producers[producer.transactional_id] = producer
    return producers


def record_key(transactional_id: str) -> str:
    """The record key of a transactional id."""
    return f"t/{transactional_id}"
