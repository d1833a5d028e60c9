"""Entries acknowledged from the journal but not yet in RocksDB, readable meanwhile.

The storage's writer puts a group commit's entries here (under one token)
before it acknowledges them; the flusher releases the token once it wrote
that batch to RocksDB. A reader looks here first and in RocksDB second:
whatever it misses here was released, which happens only after the RocksDB
write, so an acknowledged entry is always in one of the two.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

__all__ = ["WriteCache"]

_Cached = tuple[int, bytes, int]  # length, data, token


class WriteCache:
    """Per ledger, entry id -> (length, data) of entries on their way to RocksDB. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ledgers: dict[int, dict[int, _Cached]] = {}
        self._tokens: dict[int, list[tuple[int, Sequence[int]]]] = {}
        self._bytes = 0

    @property
    def held_bytes(self) -> int:
        """Data bytes held."""
        return self._bytes

    def put(self, token: int, ledger_id: int, entry_ids: Sequence[int], lengths: Sequence[int],
            datas: Sequence[bytes]) -> None:
        """Hold entries until ``release(token)``; a later put of the same id replaces it."""
        with self._lock:
            entries = self._ledgers.get(ledger_id)
            if entries is None:
                entries = self._ledgers[ledger_id] = {}
            for entry_id, length, data in zip(entry_ids, lengths, datas, strict=True):
                entries[entry_id] = (length, data, token)
                self._bytes += len(data)
            self._tokens.setdefault(token, []).append((ledger_id, entry_ids))

    def drop_ledger(self, ledger_id: int) -> None:
        """Forget a deleted ledger's entries."""
        with self._lock:
            entries = self._ledgers.pop(ledger_id, None)
            if entries:
                self._bytes -= sum(len(data) for _, data, _ in entries.values())

    def release(self, token: int) -> None:
        """Drop the entries put under ``token`` (now in RocksDB), unless put again since."""
        with self._lock:
            for ledger_id, entry_ids in self._tokens.pop(token, ()):
                entries = self._ledgers.get(ledger_id)
                if entries is None:
                    continue
                for entry_id in entry_ids:
                    held = entries.get(entry_id)
                    if held is not None and held[2] == token:
                        del entries[entry_id]
                        self._bytes -= len(held[1])
                if not entries:
                    del self._ledgers[ledger_id]

    def read(self, ledger_id: int, first_entry_id: int,
             last_entry_id: int) -> list[tuple[int, int, bytes]]:
        """The held entries of a ledger in ``[first, last]``: (id, length, data), ascending."""
        with self._lock:
            entries = self._ledgers.get(ledger_id)
            if not entries:
                return []
            found = [(entry_id, held[0], held[1]) for entry_id, held in entries.items()
                     if first_entry_id <= entry_id <= last_entry_id]
        found.sort()
        return found
