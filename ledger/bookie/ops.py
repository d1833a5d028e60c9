"""What the bookie's store is made of: its operations, a ledger's state, and the key layout.

Keys are big-endian so a ledger's entries are contiguous and iterate in order:

* entry:  ``0x01 | ledger_id (8) | entry_id (8)`` -> ``length (8) | data``
* state:  ``0x02 | ledger_id (8)`` -> ``version (1) | fenced (1) | lac (8) | last_entry_id (8)``
* tombstone: ``0x04 | ledger_id (8)`` -> ``deleted at (8, unix seconds)``: a deleted
  ledger, fenced for ever (see "Deleted ledgers" in ``ledger.bookie.storage``)
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from rocksdict import WriteBatch

from ledger.api import NO_ENTRY, AddRequest, LedgerTail

__all__ = [
    "PROBE_INTERVAL_S", "STATE_FORMAT", "STATE_VERSION", "AddOp", "DeleteOp", "Done", "FenceOp",
    "LedgerState", "Op", "ProbeOp", "delete_ledger", "entry_key_prefix", "op_bytes", "pack_state",
    "put_entries", "state_key", "tombstone_key",
]

ENTRY: Final = b"\x01"
STATE: Final = b"\x02"
STATE_FORMAT: Final = struct.Struct(">BBqq")
STATE_VERSION: Final = 1
LENGTH: Final = struct.Struct(">Q")
TOMBSTONE: Final = b"\x04"
#: A tombstone is dropped (at the bookie's start) this long after its delete: by
#: then no writer can still hold a handle opened before the delete (a broker
#: drops a deleted segment when its record watch fires, or its session ends).
TOMBSTONE_RETENTION_S: Final = 7 * 24 * 3600.0

Done = Callable[[object], None]
"""Completion callback: receives the operation's result or a ``LedgerError``."""


@dataclass(slots=True)
class LedgerState:
    fenced: bool = False
    last_add_confirmed: int = NO_ENTRY
    last_entry_id: int = NO_ENTRY

    def tail(self) -> LedgerTail:
        return LedgerTail(self.last_add_confirmed, self.last_entry_id, self.fenced)


@dataclass(slots=True)
class AddOp:
    """Store ``request``; completes with ``None``. ``queued_at``: when it was submitted."""

    request: AddRequest
    done: Done
    queued_at: float = field(default_factory=time.perf_counter)


@dataclass(slots=True)
class FenceOp:
    """Fence a ledger; completes with its ``LedgerTail``."""

    ledger_id: int
    done: Done


@dataclass(slots=True)
class DeleteOp:
    """Delete a ledger; completes with ``None``."""

    ledger_id: int
    done: Done


@dataclass(slots=True)
class ProbeOp:
    """Probe a failed store (see Failure above); completes with ``None`` or ``StorageError``."""

    done: Done


Op = AddOp | FenceOp | DeleteOp | ProbeOp

#: A failed store probes no more often than this.
PROBE_INTERVAL_S: Final = 0.5
PROBE_KEY: Final = b"\x03probe"


def op_bytes(op: Op) -> int:
    """Payload bytes of an operation, from the cumulative lengths (no per-entry work)."""
    if isinstance(op, AddOp):
        request = op.request
        return request.lengths[-1] - request.lengths[0] + len(request.datas[0])
    return 0


def entry_key_prefix(ledger_id: int) -> bytes:
    return ENTRY + ledger_id.to_bytes(8, "big")


def state_key(ledger_id: int) -> bytes:
    return STATE + ledger_id.to_bytes(8, "big")


def put_entries(write: WriteBatch, request: AddRequest) -> None:
    """Put an add's entries into a RocksDB write batch."""
    prefix = entry_key_prefix(request.ledger_id)
    put = write.put
    pack = LENGTH.pack
    for entry_id, length, data in zip(
        request.entry_ids, request.lengths, request.datas, strict=True
    ):
        put(prefix + entry_id.to_bytes(8, "big"), pack(length) + data)


def tombstone_key(ledger_id: int) -> bytes:
    return TOMBSTONE + ledger_id.to_bytes(8, "big")


def delete_ledger(write: WriteBatch, ledger_id: int, deleted_at: float | None = None) -> None:
    """Delete a ledger's entries and state and put its tombstone, in a RocksDB write batch.

    ``deleted_at`` (unix seconds) defaults to now; a journal replay puts the
    replay's time, which only keeps the tombstone longer.
    """
    write.delete_range(entry_key_prefix(ledger_id), entry_key_prefix(ledger_id + 1))
    write.delete(state_key(ledger_id))
    when = time.time() if deleted_at is None else deleted_at
    write.put(tombstone_key(ledger_id), int(when).to_bytes(8, "big"))


def pack_state(state: LedgerState) -> bytes:
    """The stored value of a ledger's state."""
    return STATE_FORMAT.pack(STATE_VERSION, state.fenced, state.last_add_confirmed,
                             state.last_entry_id)
