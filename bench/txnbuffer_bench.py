"""Transaction-buffer benchmark: recovery of one segment from chunked snapshots vs full replay.

Run ``python -m bench.txnbuffer_bench [--aborts N] [--chunk-mib M] [--json]``.
The segment holds ``N`` aborted transactions, each one transactional entry and
one abort marker (``2N`` entries, ledgers of 100,000 entries), in memory:

* ``replay``: a buffer with no snapshot recovers by replaying all ``2N`` entries;
* ``snapshot_write``: that buffer writes its snapshot in chunks of ``M`` MiB to an
  in-memory compacted store (encoding included);
* ``snapshot_recover``: a fresh buffer recovers from those chunks (nothing is
  left to replay: it is given an empty log, as a real segment seeks to the snapshot's
  position instead of scanning). The issue's target is <= 5 s for a million aborts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

from txnbuffer import EntryKind, LoggedEntry, Position, TransactionBuffer

ENTRIES_PER_LEDGER = 100_000


class _DictStore:
    """The latest value per key, as a compacted topic shows it."""

    def __init__(self, max_record_bytes: int) -> None:
        self._max_record_bytes = max_record_bytes
        self.values: dict[str, bytes] = {}

    @property
    def max_record_bytes(self) -> int:
        return self._max_record_bytes

    async def write(self, key: str, value: bytes | None) -> None:
        if value is None:
            self.values.pop(key, None)
        else:
            self.values[key] = value

    async def read_prefix(self, prefix: str) -> Mapping[str, bytes]:
        return {k: v for k, v in self.values.items() if k.startswith(prefix)}


class _ListLog:
    def __init__(self, entries: list[LoggedEntry]) -> None:
        self.entries = entries

    async def entries_after(self, position: Position | None) -> AsyncIterator[LoggedEntry]:
        for entry in self.entries:
            if position is None or entry.position > position:
                yield entry


def _segment(aborts: int) -> list[LoggedEntry]:
    entries = []
    for index in range(2 * aborts):
        position = Position(index // ENTRIES_PER_LEDGER, index % ENTRIES_PER_LEDGER)
        txn_id = (7, index // 2)
        kind = EntryKind.TXN_DATA if index % 2 == 0 else EntryKind.ABORT_MARKER
        entries.append(LoggedEntry(position, kind, txn_id))
    return entries


async def _bench(aborts: int, chunk_bytes: int) -> dict[str, Any]:
    log = _ListLog(_segment(aborts))
    store = _DictStore(chunk_bytes)
    replaying = TransactionBuffer("seg", store)
    started = time.perf_counter()
    await replaying.recover(log)
    replay_s = time.perf_counter() - started
    assert replaying.aborted_count == aborts

    started = time.perf_counter()
    await replaying.take_snapshot()
    write_s = time.perf_counter() - started

    recovering = TransactionBuffer("seg", store)
    started = time.perf_counter()
    await recovering.recover(_ListLog([]))
    recover_s = time.perf_counter() - started
    assert recovering.aborted_count == aborts
    assert recovering.max_read_position == replaying.max_read_position
    assert recovering.is_aborted((7, aborts - 1))
    return {
        "aborts": aborts,
        "segment_entries": 2 * aborts,
        "chunk_bytes": chunk_bytes,
        "snapshot_records": len(store.values),
        "snapshot_bytes": sum(len(v) for v in store.values.values()),
        "replay_s": round(replay_s, 3),
        "snapshot_write_s": round(write_s, 3),
        "snapshot_recover_s": round(recover_s, 3),
        "speedup": round(replay_s / recover_s, 1),
    }


def main() -> None:
    """Parse arguments, run, print a table or JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--aborts", type=int, default=1_000_000)
    parser.add_argument("--chunk-mib", type=float, default=5.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = asyncio.run(_bench(args.aborts, int(args.chunk_mib * 1024 * 1024)))
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for key, value in result.items():
            print(f"{key:>20}: {value}")


if __name__ == "__main__":
    main()
