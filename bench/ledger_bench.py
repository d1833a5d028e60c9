"""Ledger benchmark: raw RocksDB vs LedgerHandle in process vs one bookie over gRPC.

Run ``python -m bench.ledger_bench [--json]``. Every measurement uses the same
disk (a fresh directory under ``--dir``), sync durability and the same entry
count, for 100-byte and 1 KiB entries:

* ``raw``: rocksdict ``WriteBatch`` writes of 100 entries, each fsynced: the
  ceiling any bookie on this disk can reach with batches of that size.
* ``inproc``: ``LedgerHandle.add_async`` with ``--in-flight`` adds outstanding,
  on an in-process bookie (no gRPC hop): what a standalone broker gets.
* ``inproc_wal``: ``inproc`` with ``journal = none``: the bookie makes each group
  commit durable in RocksDB's own synced WAL instead of its journal (the
  comparison the journal is measured against, in the same run).
* ``grpc``: the same through one bookie gRPC server on loopback. The server
  runs in a child process (``folio bookie``), so client and bookie each have a
  core, as in a deployment.

Ratios ``inproc_ratio`` and ``grpc_ratio`` are against ``raw``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import deque
from pathlib import Path
from typing import Any

from rocksdict import Options, Rdict, WriteBatch, WriteOptions

from ledger.api import BookieClient
from ledger.bookie.bookie import Bookie
from ledger.bookie.remote import GrpcBookieClient
from ledger.client.directory import BookieDirectory
from ledger.client.handle import LedgerHandle
from ledger.client.ledger_client import LedgerClient
from ledger.config import BookieConfig, Journal, LedgerConfig
from ledger.metadata.rocksdb_store import RocksDBMetadataStore


def bench_raw(directory: Path, entries: int, entry_bytes: int, batch: int = 100) -> float:
    """Entries/s of synced rocksdict WriteBatches of ``batch`` entries."""
    db = Rdict(str(directory), Options(raw_mode=True))
    sync = WriteOptions()
    sync.sync = True
    data = os.urandom(entry_bytes)
    prefix = b"\x01" + (1).to_bytes(8, "big")
    started = time.perf_counter()
    for first in range(0, entries, batch):
        write = WriteBatch(raw_mode=True)
        for entry_id in range(first, min(first + batch, entries)):
            write.put(prefix + entry_id.to_bytes(8, "big"), data)
        db.write(write, sync)
    elapsed = time.perf_counter() - started
    db.close()
    return entries / elapsed


async def _drive(handle: LedgerHandle, entries: int, entry_bytes: int, in_flight: int) -> float:
    data = os.urandom(entry_bytes)
    window: deque[asyncio.Future[int]] = deque()
    add = handle.add_async
    started = time.perf_counter()
    for _ in range(entries):
        window.append(add(data))
        if len(window) >= in_flight:
            await window.popleft()
    while window:
        await window.popleft()
    elapsed = time.perf_counter() - started
    return entries / elapsed


async def _measure(
    directory: Path, bookie: BookieClient, entries: int, entry_bytes: int, in_flight: int
) -> float:
    """Entries/s of one LedgerHandle (E = Qw = Qa = 1) on ``bookie``."""
    store = RocksDBMetadataStore(str(directory / "metadata"))
    client = LedgerClient(store, BookieDirectory([bookie]), LedgerConfig())
    try:
        handle = await client.create()
        rate = await _drive(handle, entries, entry_bytes, in_flight)
        await handle.close()
        return rate
    finally:
        await client.close()
        await store.close()


async def bench_inproc(directory: Path, entries: int, entry_bytes: int, in_flight: int,
                       journal: Journal = Journal.ON) -> float:
    """Entries/s of LedgerHandle adds on an in-process bookie."""
    bookie = Bookie(BookieConfig(data_dir=str(directory / "bookie"), journal=journal))
    try:
        return await _measure(directory, bookie, entries, entry_bytes, in_flight)
    finally:
        bookie.shutdown()


def _start_bookie_process(directory: Path) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "folio.cli", "bookie", "--data-dir", str(directory),
         "--port", "0", "--durability", "sync"],
        stdout=subprocess.PIPE, text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    if "listening on" not in line:
        process.kill()
        raise RuntimeError(f"bookie did not start: {line!r}")
    return process, line.split("listening on ")[1].split()[0]


async def bench_grpc(directory: Path, entries: int, entry_bytes: int, in_flight: int) -> float:
    """Entries/s of LedgerHandle adds to one bookie process over gRPC on loopback."""
    process, address = _start_bookie_process(directory / "bookie")
    try:
        return await _measure(
            directory, GrpcBookieClient(address), entries, entry_bytes, in_flight
        )
    finally:
        process.terminate()
        process.wait(timeout=30)


def run(base: Path, entries: int, in_flight: int, progress: bool) -> dict[str, Any]:
    """Measure every mode for each entry size; returns the JSON-able report."""
    report: dict[str, Any] = {"entries": entries, "in_flight": in_flight,
                              "durability": "sync", "sizes": {}}
    for entry_bytes in (100, 1024):
        row: dict[str, float] = {}
        for mode in ("raw", "inproc", "inproc_wal", "grpc"):
            directory = Path(tempfile.mkdtemp(prefix=f"{mode}-{entry_bytes}-", dir=base))
            if progress:
                print(f"ledger_bench: {mode} {entry_bytes} B x {entries} ...", file=sys.stderr)
            if mode == "raw":
                rate = bench_raw(directory, entries, entry_bytes)
            elif mode == "inproc":
                rate = asyncio.run(bench_inproc(directory, entries, entry_bytes, in_flight))
            elif mode == "inproc_wal":
                rate = asyncio.run(bench_inproc(directory, entries, entry_bytes, in_flight,
                                                Journal.NONE))
            else:
                rate = asyncio.run(bench_grpc(directory, entries, entry_bytes, in_flight))
            shutil.rmtree(directory, ignore_errors=True)
            row[f"{mode}_entries_per_s"] = round(rate)
            row[f"{mode}_mb_per_s"] = round(rate * entry_bytes / 1e6, 2)
        row["inproc_ratio"] = round(row["inproc_entries_per_s"] / row["raw_entries_per_s"], 3)
        row["inproc_wal_ratio"] = round(
            row["inproc_wal_entries_per_s"] / row["raw_entries_per_s"], 3)
        row["grpc_ratio"] = round(row["grpc_entries_per_s"] / row["raw_entries_per_s"], 3)
        report["sizes"][str(entry_bytes)] = row
    return report


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--entries", type=int, default=200_000, help="entries per measurement")
    parser.add_argument("--in-flight", type=int, default=1000,
                        help="adds outstanding at once (>= 100)")
    parser.add_argument("--dir", default=None,
                        help="where to put the databases (default: a temp dir; same disk for all)")
    args = parser.parse_args(argv)
    if args.in_flight < 100:
        parser.error("--in-flight must be at least 100")
    base = Path(args.dir or tempfile.mkdtemp(prefix="folio-ledger-bench-"))
    base.mkdir(parents=True, exist_ok=True)
    report = run(base, args.entries, args.in_flight, progress=True)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        for size, row in report["sizes"].items():
            print(f"{size:>5} B  raw {row['raw_entries_per_s']:>9,}/s  "
                  f"inproc {row['inproc_entries_per_s']:>9,}/s ({row['inproc_ratio']:.2f})  "
                  f"inproc_wal {row['inproc_wal_entries_per_s']:>9,}/s "
                  f"({row['inproc_wal_ratio']:.2f})  "
                  f"grpc {row['grpc_entries_per_s']:>9,}/s ({row['grpc_ratio']:.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
