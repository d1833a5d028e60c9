"""Folio's Python SDK: write events to topics and read them back, over gRPC.

Concepts (see ``docs``/DESIGN for the full story):

- A **topic** is a named, ordered, durable sequence of events, split into
  **segments** that each own a slice ``[low, high)`` of the routing-key space.
- An **event** is payload bytes (made from your values by a
  :class:`Serializer`), an optional **routing key**, optional headers and a
  timestamp. Events with the same routing key land in the same segment and are
  read back in the order they were written.
- A :class:`Client` holds one background IO thread and a small pool of gRPC
  channels (``max_connections_per_endpoint``, default 2); its writers and
  readers share them (each writer's segment is a *flow* on the least busy
  channel's multiplexed Append stream, PDP-36; ``Client.pool_stats`` shows
  the pool as :class:`PoolStats`).
- An :class:`EventWriter` batches events per segment into **blocks** (the unit
  that travels and is stored), retries across reconnects without duplicates,
  and gives each event a cheap :class:`WriteFuture`.
- An :class:`EventReader` streams every segment from chosen offsets and yields
  :class:`Event` objects.

Example::

    import folio

    with folio.Client("localhost:7070") as client:
        client.create_topic("orders", segments=3)
        with client.writer("orders", folio.JsonSerializer()) as writer:
            writer.write_event({"id": 1}, routing_key="customer-7")
        with client.reader("orders", serializer=folio.JsonSerializer()) as reader:
            print(reader.read_next(timeout=5))

The SDK speaks only the public gRPC protocol (stubs in ``folio.api``); it never
imports the server packages.
"""

from folio._transport.pool import ConnectionStats, PoolStats
from folio.client import Client
from folio.errors import (
    AlreadyExistsError,
    DeliveryTimeoutError,
    EventTooLargeError,
    FolioError,
    FolioUnavailableError,
    GroupStateConflictError,
    InternalTopicError,
    InvalidArgumentError,
    InvalidBlockError,
    InvalidEventNumberError,
    LedgerUnavailableError,
    MaxTransactionSizeExceededError,
    NoSuchSegmentError,
    NotFoundError,
    OffsetOutOfRangeError,
    PermissionDeniedError,
    ReaderGroupExistsError,
    ReaderGroupNotEmptyError,
    ReaderGroupNotFoundError,
    ReaderIdInUseError,
    ReaderNotInGroupError,
    ResourceExhaustedError,
    SegmentSealedError,
    TimeoutError,
    TopicExistsError,
    TopicNameError,
    TopicNotFoundError,
    TxnFailedError,
    TxnNotFoundError,
    TxnStateError,
    WriterClosedError,
    WrongHostError,
)
from folio.models import (
    Event,
    ScaleResult,
    SegmentInfo,
    SegmentLedger,
    SegmentRange,
    TopicConfig,
    TopicInfo,
    WriteResult,
)
from folio.read.batch import BatchClient, SegmentSlice
from folio.read.cuts import Checkpoint, Position, StreamCut
from folio.read.groups import EventRead, GroupReader, ReaderGroup
from folio.read.reader import EventReader
from folio.serializers import BytesSerializer, JsonSerializer, Serializer, StringSerializer
from folio.txn.txn import (
    SingleRoutingKeyTransaction,
    SingleRoutingKeyTransactionWriter,
    TransactionResult,
)
from folio.txn.txn_full import Transaction, TransactionalWriter
from folio.txn.txn_status import TxnStatus
from folio.write._write_future import WriteFuture
from folio.write.writer import EventWriter

__all__ = [
    "AlreadyExistsError",
    "BatchClient",
    "BytesSerializer",
    "Checkpoint",
    "Client",
    "ConnectionStats",
    "DeliveryTimeoutError",
    "Event",
    "EventRead",
    "EventReader",
    "EventTooLargeError",
    "EventWriter",
    "FolioError",
    "FolioUnavailableError",
    "GroupReader",
    "GroupStateConflictError",
    "InternalTopicError",
    "InvalidArgumentError",
    "InvalidBlockError",
    "InvalidEventNumberError",
    "JsonSerializer",
    "LedgerUnavailableError",
    "MaxTransactionSizeExceededError",
    "NoSuchSegmentError",
    "NotFoundError",
    "OffsetOutOfRangeError",
    "PermissionDeniedError",
    "PoolStats",
    "Position",
    "ReaderGroup",
    "ReaderGroupExistsError",
    "ReaderGroupNotEmptyError",
    "ReaderGroupNotFoundError",
    "ReaderIdInUseError",
    "ReaderNotInGroupError",
    "ResourceExhaustedError",
    "ScaleResult",
    "SegmentInfo",
    "SegmentLedger",
    "SegmentRange",
    "SegmentSealedError",
    "SegmentSlice",
    "Serializer",
    "SingleRoutingKeyTransaction",
    "SingleRoutingKeyTransactionWriter",
    "StreamCut",
    "StringSerializer",
    "TimeoutError",
    "TopicConfig",
    "TopicExistsError",
    "TopicInfo",
    "TopicNameError",
    "TopicNotFoundError",
    "Transaction",
    "TransactionResult",
    "TransactionalWriter",
    "TxnFailedError",
    "TxnNotFoundError",
    "TxnStateError",
    "TxnStatus",
    "WriteFuture",
    "WriteResult",
    "WriterClosedError",
    "WrongHostError",
]
