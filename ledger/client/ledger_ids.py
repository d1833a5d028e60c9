"""Ledger ids: a counter node in the metadata store, advanced by compare-and-set.

The counter lives at ``IDGEN_PATH`` (``/ledgers/idgen``) and holds the last id
given out, as a format version byte (1) and 8 big-endian bytes. Allocation
reads it and sets it one higher on the version read, retrying when another
allocator won; it only uses the ``MetadataStore`` Protocol, so it works the
same on the embedded store and on ZooKeeper. Ids start at 1, are strictly
increasing and never reused. An id may be skipped (a caller that allocated one
and crashed before creating its ledger), never handed out twice.
"""

from __future__ import annotations

import logging
import struct

from ledger.api import MetadataStore
from ledger.errors import BadVersionError, MetadataError, NodeExistsError, NoNodeError

__all__ = ["FIRST_LEDGER_ID", "IDGEN_PATH", "allocate_ledger_id"]

logger = logging.getLogger(__name__)

#: The counter node; a child of ``/ledgers``, next to the ``L…`` ledger nodes.
IDGEN_PATH = "/ledgers/idgen"
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
    for _attempt in range(_MAX_ATTEMPTS):
        try:
            current = await store.get(IDGEN_PATH)
        except NoNodeError:
            try:
                await store.create(IDGEN_PATH, _encode(FIRST_LEDGER_ID), make_parents=True)
            except NodeExistsError:
                logger.info("ledger id counter created concurrently; retrying")
                continue
            return FIRST_LEDGER_ID
        ledger_id = _decode(current.data) + 1
        try:
            await store.set(IDGEN_PATH, _encode(ledger_id), current.version)
        except BadVersionError:
            logger.info("ledger id %d taken concurrently; retrying", ledger_id)
            continue
        return ledger_id
    raise MetadataError(f"{IDGEN_PATH}: no ledger id allocated after {_MAX_ATTEMPTS} attempts")
