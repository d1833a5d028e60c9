"""Folio's Python SDK: write events to topics and read them back, over gRPC.

Concepts (see ``docs``/DESIGN for the full story):

- A **topic** is a named, ordered, durable sequence of events, split into
  **segments** that each own a slice ``[low, high)`` of the routing-key space.
- An **event** is payload bytes (made from your values by a
  :class:`Serializer`), an optional **routing key**, optional headers and a
  timestamp. Events with the same routing key land in the same segment and are
  read back in the order they were written.
- A :class:`Client` holds one background IO thread and, per broker, a small
  pool of gRPC channels (``max_connections_per_endpoint``, default 2); it takes
  one endpoint or a cluster's list (``"host1:7070,host2:7070"``) and sends each
  segment's traffic to the broker that owns it; its writers and readers share
  the channels (each writer's segment is a *flow* on the least busy channel's
  multiplexed Append stream, PDP-36; ``Client.pool_stats`` shows the pool as
  :class:`PoolStats`).
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

Layout (the import-linter contracts in ``pyproject.toml`` keep it; each
package's ``__init__`` says what its modules do):

- ``cli/``, ``spark/``: the ``folio`` command and the PySpark data source, on
  top of the client.
- ``client``: :class:`Client`, the blocking face: the connection pool, the
  factories of writers and readers, their lifecycle; ``aio/``:
  ``AsyncClient``, the asyncio face over the same parts on the caller's loop;
  ``admin``: ``AdminCore``, the admin calls as coroutines both faces share
  (topics, segments, transactions by id, the unary call), shown as methods by
  ``_face``;
  ``config``: :class:`ClientConfig`, its settings, frozen and checked.
- ``write/``, ``txn/``, ``read/``: writers, transactions (single routing key
  and full), readers (``EventReader``, reader groups, batch reads, cuts).
  They never import each other, nor the client: readers reach the admin
  calls through ``read.catalog.SegmentCatalog``, writers and transactions
  through callables they are handed (``_transport.scaling``, ``_transport.unary``).
- ``_flow/``: the one append-flow engine every writer's flow runs on, and
  the contract of the writers' policies (``FlowPolicy``).
- ``_transport/``: the IO thread, the channel pool, the multiplexed append
  stream and its reconnect backoff, the read streams, block unpacking.
- ``models``, ``serializers``, ``metrics``, ``_status`` (errors from gRPC
  status and append replies), then ``api/`` (the generated public stubs and
  the wire rules every client needs: ``api.v1.routing``, the routing-key
  hash, and ``api.v1.block``, the event-block codec), then ``errors``.

Where this differs from the layout first sketched, and why:

- The wire rules sit in ``api/v1/`` beside the stubs but are hand-written
  (``scripts/gen_protos.py`` replaces only ``*_pb2*`` files there), so the
  broker can take them from ``folio.api`` alone. ``api.v1.block`` raises
  ``InvalidBlockError``, so ``errors`` is the layer below ``api``.
- ``_status`` and ``errors`` stay at the top level: the error encoding on
  the wire is changing separately (``ErrorCode``), and every layer uses them.
- ``config`` (``ClientConfig``): ``resolve`` layers defaults < the endpoint
  variables < arguments (``Client(...)``); ``load`` adds the ``[client]``
  table of a TOML file and ``FOLIO_CLIENT_<KEY>`` (the CLI's ``--config``),
  a small resolver of its own since the SDK cannot import ``ledger.settings``.
- The three append flows (an event writer's segment, a single-key
  transaction writer, a full transaction's segment) run on one engine,
  ``_flow.FlowEngine`` (setup, numbering, resends, WrongHost, the state
  machine of ``_transport.flow_state``); what they send differs, and that
  is their policies (``_flow.FlowPolicy``), held by the writers.
"""

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from folio._transport.pool import ConnectionStats, PoolStats
    from folio.acl import PermissionGrant
    from folio.client import Client
    from folio.config import ClientConfig
    from folio.errors import (
        AlreadyExistsError,
        DataLossError,
        DeliveryTimeoutError,
        DeserializationError,
        EventTooLargeError,
        FolioError,
        FolioUnavailableError,
        ForkedProcessError,
        GroupStateConflictError,
        InternalTopicError,
        InvalidArgumentError,
        InvalidBlockError,
        InvalidEventNumberError,
        LedgerUnavailableError,
        MaxTransactionSizeExceededError,
        NoBrokerAvailableError,
        NoSuchSegmentError,
        NotFoundError,
        OffsetOutOfRangeError,
        OutcomeUnknownError,
        PermissionDeniedError,
        ReaderGroupExistsError,
        ReaderGroupNotEmptyError,
        ReaderGroupNotFoundError,
        ReaderIdInUseError,
        ReaderNotInGroupError,
        ResourceExhaustedError,
        SegmentSealedError,
        TimeoutError,
        TlsError,
        TopicExistsError,
        TopicNameError,
        TopicNotFoundError,
        TxnFailedError,
        TxnNotFoundError,
        TxnStateError,
        UnauthenticatedError,
        WriterClosedError,
        WrongEndpointError,
        WrongHostError,
    )
    from folio.models import (
        BrokerInfo,
        ClusterInfo,
        DeserializationPolicy,
        Event,
        ScaleResult,
        SegmentInfo,
        SegmentLedger,
        SegmentRange,
        TopicConfig,
        TopicInfo,
        UndecodedEvent,
        WriteResult,
    )
    from folio.read.batch import BatchClient, SegmentEvents, SegmentSlice
    from folio.read.cuts import Checkpoint, Position, StreamCut
    from folio.read.groups import EventRead, GroupReader, ReaderGroup
    from folio.read.reader import EventReader
    from folio.security import TLS
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

#: Where each public name is defined: imported on first use (PEP 562), so that
#: ``import folio`` (and ``folio --version``, ``--help``) loads no gRPC.
_EXPORTS: dict[str, str] = {
    "BrokerInfo": "folio.models",
    "ClusterInfo": "folio.models",
    "ConnectionStats": "folio._transport.pool",
    "PoolStats": "folio._transport.pool",
    "PermissionGrant": "folio.acl",
    "Client": "folio.client",
    "ClientConfig": "folio.config",
    "AlreadyExistsError": "folio.errors",
    "DataLossError": "folio.errors",
    "DeliveryTimeoutError": "folio.errors",
    "DeserializationError": "folio.errors",
    "EventTooLargeError": "folio.errors",
    "FolioError": "folio.errors",
    "FolioUnavailableError": "folio.errors",
    "ForkedProcessError": "folio.errors",
    "GroupStateConflictError": "folio.errors",
    "InternalTopicError": "folio.errors",
    "InvalidArgumentError": "folio.errors",
    "InvalidBlockError": "folio.errors",
    "InvalidEventNumberError": "folio.errors",
    "LedgerUnavailableError": "folio.errors",
    "MaxTransactionSizeExceededError": "folio.errors",
    "NoBrokerAvailableError": "folio.errors",
    "NoSuchSegmentError": "folio.errors",
    "NotFoundError": "folio.errors",
    "OffsetOutOfRangeError": "folio.errors",
    "OutcomeUnknownError": "folio.errors",
    "PermissionDeniedError": "folio.errors",
    "ReaderGroupExistsError": "folio.errors",
    "ReaderGroupNotEmptyError": "folio.errors",
    "ReaderGroupNotFoundError": "folio.errors",
    "ReaderIdInUseError": "folio.errors",
    "ReaderNotInGroupError": "folio.errors",
    "ResourceExhaustedError": "folio.errors",
    "SegmentSealedError": "folio.errors",
    "TimeoutError": "folio.errors",
    "TlsError": "folio.errors",
    "TopicExistsError": "folio.errors",
    "TopicNameError": "folio.errors",
    "TopicNotFoundError": "folio.errors",
    "TxnFailedError": "folio.errors",
    "TxnNotFoundError": "folio.errors",
    "TxnStateError": "folio.errors",
    "UnauthenticatedError": "folio.errors",
    "WriterClosedError": "folio.errors",
    "WrongEndpointError": "folio.errors",
    "WrongHostError": "folio.errors",
    "Event": "folio.models",
    "ScaleResult": "folio.models",
    "SegmentInfo": "folio.models",
    "SegmentLedger": "folio.models",
    "SegmentRange": "folio.models",
    "TopicConfig": "folio.models",
    "TopicInfo": "folio.models",
    "WriteResult": "folio.models",
    "DeserializationPolicy": "folio.models",
    "UndecodedEvent": "folio.models",
    "BatchClient": "folio.read.batch",
    "SegmentSlice": "folio.read.batch",
    "SegmentEvents": "folio.read.batch",
    "Checkpoint": "folio.read.cuts",
    "Position": "folio.read.cuts",
    "StreamCut": "folio.read.cuts",
    "EventRead": "folio.read.groups",
    "GroupReader": "folio.read.groups",
    "ReaderGroup": "folio.read.groups",
    "EventReader": "folio.read.reader",
    "TLS": "folio.security",
    "BytesSerializer": "folio.serializers",
    "JsonSerializer": "folio.serializers",
    "Serializer": "folio.serializers",
    "StringSerializer": "folio.serializers",
    "SingleRoutingKeyTransaction": "folio.txn.txn",
    "SingleRoutingKeyTransactionWriter": "folio.txn.txn",
    "TransactionResult": "folio.txn.txn",
    "Transaction": "folio.txn.txn_full",
    "TransactionalWriter": "folio.txn.txn_full",
    "TxnStatus": "folio.txn.txn_status",
    "WriteFuture": "folio.write._write_future",
    "EventWriter": "folio.write.writer",
}

__all__ = [
    "TLS",
    "AlreadyExistsError",
    "BatchClient",
    "BrokerInfo",
    "BytesSerializer",
    "Checkpoint",
    "Client",
    "ClientConfig",
    "ClusterInfo",
    "ConnectionStats",
    "DataLossError",
    "DeliveryTimeoutError",
    "DeserializationError",
    "DeserializationPolicy",
    "Event",
    "EventRead",
    "EventReader",
    "EventTooLargeError",
    "EventWriter",
    "FolioError",
    "FolioUnavailableError",
    "ForkedProcessError",
    "GroupReader",
    "GroupStateConflictError",
    "InternalTopicError",
    "InvalidArgumentError",
    "InvalidBlockError",
    "InvalidEventNumberError",
    "JsonSerializer",
    "LedgerUnavailableError",
    "MaxTransactionSizeExceededError",
    "NoBrokerAvailableError",
    "NoSuchSegmentError",
    "NotFoundError",
    "OffsetOutOfRangeError",
    "OutcomeUnknownError",
    "PermissionDeniedError",
    "PermissionGrant",
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
    "SegmentEvents",
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
    "TlsError",
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
    "UnauthenticatedError",
    "UndecodedEvent",
    "WriteFuture",
    "WriteResult",
    "WriterClosedError",
    "WrongEndpointError",
    "WrongHostError",
]


def __getattr__(name: str) -> object:
    """A public name, imported from its module on first use (then cached here)."""
    module = _EXPORTS.get(name)
    if module is None:
        if name.startswith("__"):
            raise AttributeError(f"module 'folio' has no attribute {name!r}")
        try:  # a submodule (``folio.errors``), as when every module was imported eagerly
            return importlib.import_module(f"folio.{name}")
        except ModuleNotFoundError:
            raise AttributeError(f"module 'folio' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
