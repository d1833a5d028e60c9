"""Idempotent producer ids: unique across restarts and brokers, from blocks in the metadata store.

InitProducerId gives each producer an id never given before, so its
(id, epoch, sequence) numbers can never be taken for another's: the segment
keeps the last event number per writer id (``kafka:<id>:<epoch>``) and drops
what it has seen. Ids come from a block of ``BLOCK_SIZE`` reserved by
compare-and-set of ``/folio/kafka/producer_ids`` (Kafka's
AllocateProducerIds does the same in its controller): a crash loses at most
the rest of a block, never reuses one.
"""

from __future__ import annotations

import asyncio
import struct

from broker.metadata_paths import PRODUCER_IDS_PATH
from ledger.api import MetadataStore
from ledger.errors import BadVersionError, NodeExistsError, NoNodeError

__all__ = ["BLOCK_SIZE", "PRODUCER_IDS_PATH", "ProducerIds"]

BLOCK_SIZE = 1000
#: Persisted format: version 1, then the next unreserved id.
_RECORD = struct.Struct(">Bq")
_FORMAT_VERSION = 1


class ProducerIds:
    """Gives out producer ids from blocks reserved in ``store``."""

    def __init__(self, store: MetadataStore) -> None:
        self._store = store
        self._next = 0
        self._end = 0
        self._lock = asyncio.Lock()

    async def next_id(self) -> int:
        """A producer id never given out before (``LedgerError`` if the store fails)."""
        async with self._lock:
            if self._next >= self._end:
                self._next = await self._reserve()
                self._end = self._next + BLOCK_SIZE
            value = self._next
            self._next += 1
            return value

    async def _reserve(self) -> int:
        while True:
            try:
                node = await self._store.get(PRODUCER_IDS_PATH)
            except NoNodeError:
                try:
                    await self._store.create(PRODUCER_IDS_PATH, _RECORD.pack(
                        _FORMAT_VERSION, BLOCK_SIZE), make_parents=True)
                    return 0
                except NodeExistsError:
                    continue
            version, start = _RECORD.unpack(node.data)
            if version != _FORMAT_VERSION:
                raise ValueError(f"{PRODUCER_IDS_PATH} has format {version}, expected 1")
            try:
                await self._store.set(PRODUCER_IDS_PATH, _RECORD.pack(
                    _FORMAT_VERSION, start + BLOCK_SIZE), node.version)
            except BadVersionError:
                continue  # another broker reserved a block meanwhile
            return int(start)
