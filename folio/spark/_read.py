"""Reading one slice ``[start, end)`` of a segment as Arrow record batches, on a Spark worker.

One ``Read`` stream on a plain (blocking) gRPC channel opened here, in the
worker, never pickled. Every response (about ``_MAX_BYTES`` of whole blocks)
becomes one ``RecordBatch``: blocks are decoded column by column and turned
into Arrow arrays in one call per column, never an object per event. The
slice is done once the stream's ``next_offset`` (or the last event) reaches
``end``, so a slice ending in events of aborted transactions ends too. A
broken stream is opened again from the next offset (a few times, with backoff).

With a ``valueFormat`` the payloads are also decoded into a ``value`` column
(``folio.spark._values``: per event, the one per-event step, only when asked
for); an undecodable payload fails the task (the default), or its row is left
out or kept with ``value_error`` set.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any, Final

import grpc
import pyarrow as pa

from folio._status import error_from_rpc
from folio.api.v1 import read_pb2, read_pb2_grpc
from folio.api.v1.block import decode_block
from folio.config import ClientConfig
from folio.read.reader import Isolation
from folio.spark._plan import Slice
from folio.spark._values import VALUE_COLUMNS_DDL, ErrorPolicy, ValueDecoder, ValueFormat

__all__ = ["ARROW_SCHEMA", "SCHEMA_DDL", "VALUE_ARROW_SCHEMA", "open_channel", "read_slice",
           "schema_ddl"]

#: The DataFrame's columns (``DataSource.schema``).
SCHEMA_DDL: Final = ("topic string, segment string, offset bigint, routing_key string, "
                     "payload binary, timestamp timestamp, headers map<string, binary>")
_HEADERS_TYPE: Final = pa.map_(pa.string(), pa.binary())
#: The same, as the Arrow batches ``read_slice`` yields.
ARROW_SCHEMA: Final = pa.schema([
    ("topic", pa.string()), ("segment", pa.string()), ("offset", pa.int64()),
    ("routing_key", pa.string()), ("payload", pa.binary()),
    ("timestamp", pa.timestamp("us", tz="UTC")), ("headers", _HEADERS_TYPE),
])
#: With a ``valueFormat`` other than ``binary``: two more columns.
VALUE_ARROW_SCHEMA: Final = ARROW_SCHEMA.append(pa.field("value", pa.string())).append(
    pa.field("value_error", pa.string()))
_MAX_BYTES: Final = 4 * 1024 * 1024
_MAX_WAIT_MS: Final = 500
_RETRIES: Final = 5
_ISOLATIONS: Final = {"read_committed": read_pb2.ReadRequest.READ_COMMITTED,
                      "read_uncommitted": read_pb2.ReadRequest.READ_UNCOMMITTED}
_CHANNEL_OPTIONS: Final = [("grpc.max_receive_message_length", 64 * 1024 * 1024),
                           ("grpc.max_send_message_length", 64 * 1024 * 1024)]


def schema_ddl(value_format: ValueFormat) -> str:
    """The DataFrame's columns for ``value_format``."""
    return SCHEMA_DDL if value_format == "binary" else f"{SCHEMA_DDL}, {VALUE_COLUMNS_DDL}"


def open_channel(client: ClientConfig) -> grpc.Channel:
    """A blocking channel to the broker, for one task, with the client's TLS and token."""
    return client.security().sync_channel(client.endpoint, _CHANNEL_OPTIONS)


class _Columns:
    """The columns of one batch being gathered from blocks."""

    def __init__(self, values: ValueDecoder | None = None) -> None:
        self.payloads: list[bytes] = []
        self.keys: list[str | None] = []
        self.stamps: list[int | None] = []
        self.headers: list[dict[str, bytes]] | None = None
        self.first_offsets: list[tuple[int, int]] = []  # (offset, count) runs
        self._decoder = values
        self.values: list[str | None] = []
        self.value_errors: list[str | None] = []

    def add(self, data: bytes, block_offset: int, low: int, high: int) -> None:
        """Events ``low`` to ``high`` (indexes in the block) of the block at ``block_offset``."""
        decoded = decode_block(data)
        whole = low == 0 and high == len(decoded.payloads)
        payloads = decoded.payloads if whole else decoded.payloads[low:high]
        keys: list[str | None] = [None] * (high - low)
        if decoded.routing_keys:
            keys = list(decoded.routing_keys if whole else decoded.routing_keys[low:high])
        stamps: list[int | None] = [None] * (high - low)
        if decoded.timestamps_ms:
            stamps = [stamp * 1000 for stamp in decoded.timestamps_ms[low:high]]
        headers = decoded.headers[low:high] if decoded.headers else None
        if self._decoder is None:
            self._extend(payloads, keys, stamps, headers, [(block_offset + low, high - low)])
            return
        values, errors, keep = self._decoder.decode(payloads, block_offset + low)
        if keep is not None:  # rows left out ("skip"): every column follows
            payloads = [payloads[i] for i in keep]
            keys, stamps = [keys[i] for i in keep], [stamps[i] for i in keep]
            values, errors = [values[i] for i in keep], [errors[i] for i in keep]
            headers = None if headers is None else [headers[i] for i in keep]
            runs = [(block_offset + low + i, 1) for i in keep]
        else:
            runs = [(block_offset + low, high - low)]
        self.values += values
        self.value_errors += errors
        self._extend(payloads, keys, stamps, headers, runs)

    def _extend(self, payloads: list[bytes], keys: list[str | None],
                stamps: list[int | None], headers: list[dict[str, bytes]] | None,
                runs: list[tuple[int, int]]) -> None:
        had = len(self.payloads)
        self.payloads += payloads
        self.keys += keys
        self.stamps += stamps
        if headers is not None:
            if self.headers is None:
                self.headers = [{} for _ in range(had)]
            self.headers += headers
        elif self.headers is not None:
            self.headers += [{} for _ in range(len(payloads))]
        self.first_offsets += runs

    def batch(self, topic: str, segment: str) -> pa.RecordBatch:
        count = len(self.payloads)
        offsets = [offset for first, run in self.first_offsets
                   for offset in range(first, first + run)]
        if self.headers is None:
            headers: Any = pa.MapArray.from_arrays(
                pa.array([0] * (count + 1), pa.int32()), pa.array([], pa.string()),
                pa.array([], pa.binary()))
        else:
            headers = pa.array([list(h.items()) for h in self.headers], _HEADERS_TYPE)
        columns = [
            pa.array([topic] * count, pa.string()),
            pa.array([segment] * count, pa.string()),
            pa.array(offsets, pa.int64()),
            pa.array(self.keys, pa.string()),
            pa.array(self.payloads, pa.binary()),
            pa.array(self.stamps, pa.timestamp("us", tz="UTC")),
            headers,
        ]
        if self._decoder is None:
            return pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA)
        columns += [pa.array(self.values, pa.string()), pa.array(self.value_errors, pa.string())]
        return pa.RecordBatch.from_arrays(columns, schema=VALUE_ARROW_SCHEMA)


def read_slice(channel: grpc.Channel, topic: str, piece: Slice,
               isolation: Isolation = "read_committed", value_format: ValueFormat = "binary",
               on_deserialization_error: ErrorPolicy = "fail") -> Iterator[pa.RecordBatch]:
    """The events of ``piece`` in offset order, one batch per Read response with events.

    With ``read_committed`` the stream waits at a transaction still open
    inside the slice until it commits or aborts (its timeout aborts it).
    ``value_format`` other than ``binary`` adds the ``value`` columns
    (``folio.spark._values``).

    Raises:
        DeserializationError: a payload does not decode as ``value_format``
            and ``on_deserialization_error`` is ``fail``: it names the segment
            and offset.
        OffsetOutOfRangeError: the slice begins before the segment's start
            (truncated, or deleted by retention).
        NoSuchSegmentError: the segment (or topic) is gone.
        FolioError: another failure, or a broken stream that did not come back.
    """
    stub = read_pb2_grpc.ReadStub(channel)
    position, end = piece.start, piece.end
    decoder = None if value_format == "binary" else ValueDecoder(
        topic, piece.segment, value_format, on_deserialization_error)
    retries = 0
    while position < end:
        call = stub.Read(read_pb2.ReadRequest(
            segment=piece.segment, offset=position, max_bytes=_MAX_BYTES,
            max_wait_ms=_MAX_WAIT_MS, isolation=_ISOLATIONS[isolation]))
        try:
            for response in call:
                retries = 0
                columns = _Columns(decoder)
                for block in response.blocks:
                    offset, count = block.offset, block.event_count
                    if offset + count <= position:
                        continue  # sent again after a reconnect
                    if offset >= end:
                        break
                    low = position - offset if position > offset else 0
                    high = min(count, end - offset)
                    columns.add(block.data, offset, low, high)
                    position = offset + high
                if columns.first_offsets:
                    yield columns.batch(topic, piece.segment)
                if response.next_offset > position:
                    position = min(response.next_offset, end)  # left-out events skipped
                if position >= end or response.end_of_segment:
                    return
        except grpc.RpcError as rpc_error:
            error = error_from_rpc(rpc_error)
            retries += 1
            if not error.retriable or retries > _RETRIES:
                raise error from None
            time.sleep(0.05 * 2 ** retries)
        finally:
            call.cancel()  # type: ignore[no-untyped-call]
