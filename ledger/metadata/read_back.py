"""Reading a write back after its answer was lost: did it land?

A write that raised ``MetadataUnavailableError`` may or may not have been
applied. ``landed`` reads the node on the same store: ZooKeeper answers one
session's requests in order and the store sends them in order, so the read
sees the write if it was ever applied. A node holding exactly the bytes
written is taken as the write having landed (callers write records that
another writer would not write byte for byte: a record with its version,
time or owner in it); anything else is "not ours", and the caller goes on
as after a refusal it can retry (a compare-and-set loop reads again).
"""

from __future__ import annotations

from ledger.api import MetadataStore, Versioned
from ledger.errors import NoNodeError

__all__ = ["landed"]


async def landed(store: MetadataStore, path: str, data: bytes) -> Versioned | None:
    """The node at ``path`` if it holds ``data`` now; None if it holds other bytes or is gone.

    Raises what the store's read raises (``MetadataUnavailableError``: still
    unknown; the caller must not act as if the write failed).
    """
    try:
        node = await store.get(path)
    except NoNodeError:
        return None
    return node if node.data == data else None
