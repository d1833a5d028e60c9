"""Python function calls per append, counted by cProfile on the real in-process stack.

``python scripts/append_calls.py [--blocks N] [--concurrent C]`` loads segment
``t/0`` on an in-process bookie (asynchronous durability) and the RocksDB
metadata store in a temporary directory, warms it up, then profiles ``N``
appends of one block each, ``C`` awaited together per round (concurrent
appends share a ledger add run), and prints the calls per append: all of
them (the event loop's included) and those in ``broker/`` and ``ledger/``
only. The counts are exact and repeatable, unlike times on a shared machine:
they show whether the Python work per block changed (project rule 4).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import sys
import tempfile
from pathlib import Path

from broker.api import Block, TopicConfig
from broker.segments.names import segment_path
from broker.segments.records import SegmentRecord
from broker.segments.segment import LedgerSegment
from ledger.bookie.bookie import Bookie
from ledger.client.directory import BookieDirectory
from ledger.client.ledger_client import LedgerClient
from ledger.config import BookieConfig, Durability, LedgerConfig
from ledger.metadata.rocksdb_store import RocksDBMetadataStore

_MAX_ENTRY_BYTES = 1024 * 1024


async def _run(root: Path, blocks: int, concurrent: int) -> pstats.Stats:
    store = RocksDBMetadataStore(str(root / "metadata"))
    bookie = Bookie(BookieConfig(data_dir=str(root / "bookie"), durability=Durability.ASYNC,
                                 max_entry_bytes=_MAX_ENTRY_BYTES))
    ledgers = LedgerClient(store, BookieDirectory([bookie]),
                           LedgerConfig(max_entry_bytes=_MAX_ENTRY_BYTES))
    await store.create(segment_path("t", 0), SegmentRecord("t", 0).to_bytes(),
                       make_parents=True)
    segment = await LedgerSegment.load(ledgers, store, topic="t", number=0, key_low=0.0,
                                       key_high=1.0, config=TopicConfig(), clock=lambda: 0.0)
    block = Block(b"x" * 1000, 10)
    number = 0

    async def round_of_appends() -> None:
        nonlocal number
        calls = []
        for index in range(concurrent):
            calls.append(segment.append([block], f"w{index}", number + 10))
        number += 10
        await asyncio.gather(*calls)

    for _ in range(50):
        await round_of_appends()
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(blocks // concurrent):
        await round_of_appends()
    profile.disable()
    await segment.close()
    await ledgers.close()
    bookie.shutdown()
    await store.close()
    return pstats.Stats(profile)


def main(argv: list[str] | None = None) -> int:
    """Print the calls per append (all, and in broker/ and ledger/)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=2000, help="appends profiled")
    parser.add_argument("--concurrent", type=int, default=1, help="appends awaited together")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as root:
        stats = asyncio.run(_run(Path(root), args.blocks, args.concurrent))
    appends = args.blocks // args.concurrent * args.concurrent
    total = own = 0
    for (filename, _line, _name), row in stats.stats.items():  # type: ignore[attr-defined]
        calls = row[1]  # primitive and recursive calls alike
        total += calls
        if "/broker/" in filename or "/ledger/" in filename:
            own += calls
    print(f"appends {appends} concurrent {args.concurrent}: {total / appends:.1f} calls per "
          f"append, {own / appends:.1f} in broker/ and ledger/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
