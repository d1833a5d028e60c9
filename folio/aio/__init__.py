"""``folio.aio``: the SDK for asyncio code, on the caller's event loop.

The same parts as the blocking ``folio.Client`` (brokers and pooled channels,
segment flows, read streams, the admin calls as coroutines of
``folio.admin.AdminCore``), run on the loop the application already runs
instead of the blocking client's IO thread:

- :class:`AsyncClient` (``folio.aio.client``): admin coroutines with the
  blocking face's names, signatures, errors and reconciliation of unknown
  outcomes; ``await client.writer(topic)``, ``await client.reader(topic)``.
- :class:`AsyncEventWriter` (``folio.aio._writer``): ``await writer.write(event)``
  returns once acknowledged; ``await writer.send(event)`` waits for room only
  and returns the event's :class:`PendingWrite` (``await`` it for the
  acknowledgement); ``write_nowait`` never waits.
- :class:`AsyncEventReader` (``folio.aio._reader``): ``await reader.read()``,
  ``async for event in reader``.
- :class:`AsyncBatchClient` (``folio.aio._batch``): ``client.batch_client()``;
  ``await segments(topic)``, ``async for event in await read_segment(slice)``.
- :class:`AsyncReaderGroup`, :class:`AsyncGroupReader` (``folio.aio._groups``):
  ``await client.reader_group(name, topics)``, ``await group.reader(id)``,
  ``async for read in reader`` (events and checkpoint events with positions).
- :class:`AsyncTxnWriter` (``folio.aio._txn``): single-routing-key
  transactions, ``async with writer.begin() as txn: txn.write(...)``.
- :class:`AsyncTransactionalWriter`, :class:`AsyncFullTransaction`
  (``folio.aio._txn_full``): transactions across segments,
  ``txn = await writer.begin()``, ``txn.write_event(...)``, ``await txn.commit()``.

docs/sdk.md shows both faces side by side.
"""

from __future__ import annotations

from folio.aio._batch import AsyncBatchClient, AsyncSegmentEvents
from folio.aio._groups import AsyncGroupReader, AsyncReaderGroup
from folio.aio._pending import PendingWrite
from folio.aio._reader import AsyncEventReader
from folio.aio._txn import AsyncTransaction, AsyncTxnWriter
from folio.aio._txn_full import AsyncFullTransaction, AsyncTransactionalWriter
from folio.aio._writer import AsyncEventWriter
from folio.aio.client import AsyncClient

__all__ = [
           "AsyncBatchClient",
           "AsyncClient",
           "AsyncEventReader",
           "AsyncEventWriter",
           "AsyncFullTransaction",
           "AsyncGroupReader",
           "AsyncReaderGroup",
           "AsyncSegmentEvents",
           "AsyncTransaction",
           "AsyncTransactionalWriter",
           "AsyncTxnWriter",
           "PendingWrite",
]
