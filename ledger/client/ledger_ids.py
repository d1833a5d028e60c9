"""Ledger ids: a counter node in the metadata store, advanced by compare-and-set.

The counter lives at ``IDGEN_PATH`` (``/ledgers/idgen``) and holds the last id
given out, as a format version byte (1) and 8 big-endian bytes. Allocation
reads it and sets it one higher on the version read, retrying when another
allocator won; it only uses the ``MetadataStore`` Protocol, so it works the
same on the embedded store and on ZooKeeper. Ids start at 1, are strictly
increasing and never reused. An id may be skipped (a caller that allocated one
and crashed before creating its ledger, or a compare-and-set whose answer was
lost: the next allocation reads the counter again), never handed out twice.

Without contention: ``LedgerIdAllocator`` (one per ``LedgerClient``) serves
every caller of a process waiting at the same time with ONE compare-and-set
that moves the counter past all of them, instead of each caller racing the
others (a broker loading its segments at start created dozens of ledgers at
once, and each lost CAS cost a round trip: "ledger id N taken concurrently").
Ids stay strictly increasing in the order they are handed out, across
processes too: a batch reserves a range above every id handed out before it,
and the callers of a batch get its ids in the order they asked. That order
matters: a segment's ledgers must have increasing ids (positions compare by
``(ledger_id, entry_id)``), so per-broker blocks of ids, which would hand
out an id lower than another broker's earlier one, are not an option.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Callable

from ledger.api import MetadataStore
from ledger.errors import BadVersionError, MetadataError, NodeExistsError, NoNodeError
from ledger.metadata.paths import IDGEN_PATH

__all__ = ["FIRST_LEDGER_ID", "IDGEN_PATH", "LedgerIdAllocator", "allocate_ledger_id"]

logger = logging.getLogger(__name__)

#: The first id handed out.
FIRST_LEDGER_ID = 1

_FORMAT_VERSION = 1
_COUNTER = struct.Struct(">BQ")  # format version, last allocated ledger id
# Each lost compare-and-set means another allocator won, so progress is certain;
# the bound only turns a misbehaving store into an error instead of a spin.
_MAX_ATTEMPTS = 1000


def _encode(ledger_id: int) -> bytes:
    return _COUNTER.pack(_FORMAT_VERSION, ledger_id)


def _decode(data: bytes) -> int:
    if len(data) != _COUNTER.size:
        raise MetadataError(f"{IDGEN_PATH}: counter of {len(data)} bytes, expected {_COUNTER.size}")
    format_version, ledger_id = _COUNTER.unpack(data)
    if format_version != _FORMAT_VERSION:
        raise MetadataError(f"{IDGEN_PATH}: unknown counter format version {format_version}")
    return int(ledger_id)


async def allocate_ledger_id(store: MetadataStore) -> int:
    """Allocate a new ledger id: strictly greater than every id allocated before.

    Creates ``/ledgers`` and the counter on first use.

    Args:
        store: any ``MetadataStore``.

    Returns:
        The new ledger id (``FIRST_LEDGER_ID`` for the first one).

    Raises:
        MetadataError: the counter node is corrupt, the store failed, or the
            compare-and-set kept losing (a misbehaving store).
    """
    return await _reserve(store, lambda: 1)


async def _reserve(store: MetadataStore, count: Callable[[], int]) -> int:
    """Move the counter past ``count()`` new ids (asked again on each try); the first one."""
    for _attempt in range(_MAX_ATTEMPTS):
        try:
            current = await store.get(IDGEN_PATH)
        except NoNodeError:
            wanted = count()
            try:
                await store.create(IDGEN_PATH, _encode(FIRST_LEDGER_ID + wanted - 1),
                                   make_parents=True)
            except NodeExistsError:
                logger.info("ledger id counter created concurrently; retrying")
                continue
            return FIRST_LEDGER_ID
        first = _decode(current.data) + 1
        wanted = count()
        try:
            await store.set(IDGEN_PATH, _encode(first + wanted - 1), current.version)
        except BadVersionError:
            logger.info("ledger id %d taken concurrently; retrying", first)
            continue
        return first
    raise MetadataError(f"{IDGEN_PATH}: no ledger id allocated after {_MAX_ATTEMPTS} attempts")


class LedgerIdAllocator:
    """Ledger ids for one process: the callers waiting together share one compare-and-set.

    Args:
        store: where the counter lives.
    """

    def __init__(self, store: MetadataStore) -> None:
        self._store = store
        self._waiting: list[asyncio.Future[int]] = []
        self._task: asyncio.Task[None] | None = None

    async def allocate(self) -> int:
        """A new ledger id (see ``allocate_ledger_id``); raises what the store raises."""
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._waiting.append(future)
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._serve())
        return await future

    async def _serve(self) -> None:
        while self._waiting:
            taken = 0

            def count() -> int:
                nonlocal taken
                taken = len(self._waiting)  # everyone waiting when the CAS is sent
                return taken

            try:
                first = await _reserve(self._store, count)
            except Exception as error:
                # Nothing known reserved (ids maybe skipped): the batch learns it;
                # callers that came during the failed try go on in the next round.
                taken = taken or len(self._waiting)
                failed, self._waiting = self._waiting[:taken], self._waiting[taken:]
                for future in failed:
                    if not future.done():
                        future.set_exception(error)
                continue
            batch, self._waiting = self._waiting[:taken], self._waiting[taken:]
            for offset, future in enumerate(batch):
                if not future.done():  # a caller that went away skips its id
                    future.set_result(first + offset)
