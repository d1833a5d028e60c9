"""Entries acknowledged from the journal but not yet in RocksDB, readable meanwhile.

The storage's writer puts a group commit's adds here (under one token, its
number) before it acknowledges them; the flusher releases the token once it
wrote that group to RocksDB. A reader looks here first and in RocksDB second:
whatever it misses here was released, which happens only after the RocksDB
write, so an acknowledged entry is always in one of the two.

The cache holds the add requests themselves, per ledger in the order they
came: putting and releasing cost per request, not per entry (entry ids in a
request increase, so a read finds its range by bisection). Tokens are released
in the order they were put (the flusher writes in order).
"""

from __future__ import annotations

import threading
from bisect import bisect_left, bisect_right
from collections import deque

from ledger.api import AddRequest

__all__ = ["WriteCache"]


class WriteCache:
    """Per ledger, the add requests on their way to RocksDB. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ledgers: dict[int, deque[tuple[int, AddRequest]]] = {}
        self._tokens: dict[int, list[int]] = {}

    def put(self, token: int, request: AddRequest) -> None:
        """Hold an add until ``release(token)``; a later add of the same id wins in reads."""
        ledger_id = request.ledger_id
        with self._lock:
            held = self._ledgers.get(ledger_id)
            if held is None:
                held = self._ledgers[ledger_id] = deque()
            held.append((token, request))
            self._tokens.setdefault(token, []).append(ledger_id)

    def drop_ledger(self, ledger_id: int) -> None:
        """Forget a deleted ledger's entries."""
        with self._lock:
            self._ledgers.pop(ledger_id, None)

    def release(self, token: int) -> None:
        """Drop the adds put under ``token`` and before it (now in RocksDB)."""
        with self._lock:
            for ledger_id in self._tokens.pop(token, ()):
                held = self._ledgers.get(ledger_id)
                if held is None:
                    continue
                while held and held[0][0] <= token:
                    held.popleft()
                if not held:
                    del self._ledgers[ledger_id]

    def read(self, ledger_id: int, first_entry_id: int,
             last_entry_id: int) -> list[tuple[int, int, bytes]]:
        """The held entries of a ledger in ``[first, last]``: (id, length, data), ascending."""
        with self._lock:
            held = self._ledgers.get(ledger_id)
            if not held:
                return []
            requests = [request for _, request in held]
        found: dict[int, tuple[int, bytes]] = {}
        for request in requests:  # in order: a later add of the same id replaces it
            entry_ids = request.entry_ids
            low = bisect_left(entry_ids, first_entry_id)
            high = bisect_right(entry_ids, last_entry_id)
            for index in range(low, high):
                found[entry_ids[index]] = (request.lengths[index], request.datas[index])
        return [(entry_id, *found[entry_id]) for entry_id in sorted(found)]
