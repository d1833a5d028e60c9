"""The SDK's read loop alone: ``run_consume`` over a scripted Read stub, no broker, no network.

A catch-up read's responses (``--events`` events of ``--size`` bytes in
blocks of 256 KiB, four blocks per response, as a broker sends a backlog
the default writer wrote) are made once in memory; an ``EventReader`` on its
own IO thread reads them from a stub whose ``Read`` yields them, and
``folio perf consume``'s loop (``run_consume``) takes them with ``read_many``
(``--api many``) or ``read_next`` (``--api next``). It prints the CPU per
event of the caller's thread and of the process, and the cyclic garbage
collector's runs per generation (``gc.callbacks``)::

    python -m bench.read_loop --size 100 --events 400000 --api many

What it leaves out (gRPC's receive, the one-pass parse of a ``ReadView``:
the stub's responses are plain ``ReadResponse`` messages, decoded block by
block) is measured by ``bench.catchup`` and ``bench.catchup_versions``.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections.abc import AsyncIterator
from typing import Any, cast

from folio._transport.io_thread import IoThread
from folio.api.v1 import read_pb2
from folio.api.v1.block import encode_block
from folio.cli._perf_consume import ConsumeConfig, run_consume
from folio.read.reader import EventReader
from folio.serializers import BytesSerializer

__all__ = ["main"]

_BLOCK_BYTES = 256 * 1024
_BLOCKS_PER_RESPONSE = 4


def _responses(size: int, events: int) -> list[read_pb2.ReadResponse]:
    per_block = max(_BLOCK_BYTES // (size + 16), 1)
    data = encode_block([bytes(size)] * per_block)
    responses = []
    offset = 0
    while offset < events:
        blocks = []
        for _ in range(_BLOCKS_PER_RESPONSE):
            blocks.append(read_pb2.ReadBlock(offset=offset, event_count=per_block, data=data))
            offset += per_block
        responses.append(read_pb2.ReadResponse(blocks=blocks, next_offset=offset))
    return responses


class _Stub:
    """A Read stub whose one call yields the responses, then ends (the reader stops first)."""

    def __init__(self, responses: list[read_pb2.ReadResponse]) -> None:
        self._responses = responses

    def Read(self, request: read_pb2.ReadRequest) -> _Stub:
        return self

    def __aiter__(self) -> AsyncIterator[read_pb2.ReadResponse]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[read_pb2.ReadResponse]:
        for response in self._responses:
            yield response

    def cancel(self) -> None:
        pass


def main(argv: list[str] | None = None) -> int:
    """Parse options, read, print."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.read_loop",
        description="The SDK's read loop alone (run_consume over a scripted Read stub, no "
        "broker): CPU per event and the garbage collector's runs.")
    parser.add_argument("--size", type=int, default=100, help="event bytes (default 100)")
    parser.add_argument("--events", type=int, default=400_000,
                        help="events read (default 400000)")
    parser.add_argument("--api", choices=("many", "next"), default="many",
                        help="read_many (default) or read_next")
    args = parser.parse_args(argv)
    responses = _responses(args.size, args.events)
    collections = [[0, 0.0] for _ in range(3)]
    started = [0.0]

    def count(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            runs = collections[info["generation"]]
            runs[0] += 1
            runs[1] += time.perf_counter() - started[0]

    io = IoThread("bench-read-loop")

    class _Client:
        def reader(self, topic: str, start: str) -> EventReader[bytes]:
            return EventReader(topic, {f"{topic}/0": 0}, BytesSerializer(), io=io,
                               stub=cast("Any", _Stub(responses)))

    gc.callbacks.append(count)
    try:
        caller, process = time.thread_time(), time.process_time()
        result = run_consume(cast("Any", _Client()), ConsumeConfig(
            "t", "earliest", max_events=args.events, read_next=args.api == "next"))
        caller, process = time.thread_time() - caller, time.process_time() - process
    finally:
        gc.callbacks.remove(count)
        io.close()
    per_event_us = 1e6 / max(result.events, 1)
    print(f"{args.size} B, read_{args.api}: {result.events:,} events; caller's thread "
          f"{caller * per_event_us:.2f} us/event, process {process * per_event_us:.2f} "
          f"us/event; collections young/middle/full: "
          + " / ".join(f"{runs} ({seconds:.2f} s)" for runs, seconds in collections))
    return 0


if __name__ == "__main__":
    sys.exit(main())
