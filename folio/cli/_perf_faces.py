"""``folio perf faces``: the asyncio face (``folio.aio``) against the blocking face, in one run.

Each scenario writes ``event_bytes`` keyless events to one topic for
``duration_s`` seconds as fast as it can, then flushes; only acknowledged
events count, and the time includes the flush:

- ``blocking N``: one ``folio.Client``, N writers, each fed by a thread of
  its own calling ``write_event`` (the IO thread does the rest);
- ``async N``: one ``folio.aio.AsyncClient`` on one loop, N writers, each fed
  by a coroutine calling ``await writer.send(...)`` (it waits only for room);
- ``fan-in C``: one async writer and C coroutines each calling
  ``await writer.write(...)`` (returning once acknowledged) in a loop; the
  latency of each write, send to acknowledgement, is kept in a list and goes
  to an HdrHistogram after the run (recording there costs a few µs per event,
  which on the loop would have been part of every other write's latency).

Both faces write the same events with the same writer settings (the
defaults: ``linger_ms`` 5, ``batch_size_bytes`` 256 KiB, ``max_in_flight`` 5
blocks per segment, so as many events in flight), and their feeders look at
the clock every 64 events. Neither feeder waits for acknowledgements: the
blocking one waits only when a segment's pipe is full, the async one only
when its writer's backlog (events waiting for room, about a batch) is.

The scenarios alternate (blocking 1, async 1, blocking 4, async 4; with
``rounds`` > 1 the next round starts with the async face, and so on), each
with a new client, so a warm-up or a slow moment is not all one face's; then
the fan-in. The async ones share one event loop. Each scenario also reports
the process's CPU time per event (``time.process_time``: every thread, the
blocking face's caller, IO and gRPC threads included), which other work on
the machine changes much less than events/s; with several rounds, each
scenario's figures are the median round's (by events/s).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import folio
from folio.aio import AsyncClient
from folio.cli._common import (
    client_config,
    describe_error,
    fail,
    non_negative_int,
    positive_float,
    positive_int,
    resolve_endpoint,
)
from folio.cli._options import add_endpoint_option
from folio.cli._perf_stats import latency_ms, new_histogram, record_us
from folio.config import ClientConfig
from folio.errors import FolioError, TopicExistsError

__all__ = ["add_parser", "run_faces"]

PROG = "folio perf faces"


def _blocking(config: ClientConfig, topic: str, writers: int, duration_s: float,
              payload: bytes) -> dict[str, Any]:
    with folio.Client(config=config) as client:
        made = [client.writer(topic) for _ in range(writers)]
        counts = [0] * writers
        started = time.monotonic()
        deadline = started + duration_s

        def feed(index: int) -> None:
            write = made[index].write_event
            count = 0
            while time.monotonic() < deadline:
                for _ in range(64):
                    write(payload)
                count += 64
            counts[index] = count

        cpu_started = time.process_time()
        threads = [threading.Thread(target=feed, args=(i,)) for i in range(writers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for writer in made:
            writer.flush()
        elapsed = time.monotonic() - started
        cpu_s = time.process_time() - cpu_started
    return _rate(sum(counts), elapsed, cpu_s)


async def _async(config: ClientConfig, topic: str, writers: int, duration_s: float,
                 payload: bytes) -> dict[str, Any]:
    async with AsyncClient(config=config) as client:
        made = [await client.writer(topic) for _ in range(writers)]
        started = time.monotonic()
        deadline = started + duration_s

        async def feed(index: int) -> int:
            send = made[index].send
            count = 0
            while time.monotonic() < deadline:
                for _ in range(64):
                    await send(payload)
                count += 64
            return count

        cpu_started = time.process_time()
        counts = await asyncio.gather(*(feed(i) for i in range(writers)))
        await asyncio.gather(*(writer.flush() for writer in made))
        elapsed = time.monotonic() - started
        cpu_s = time.process_time() - cpu_started
    return _rate(sum(counts), elapsed, cpu_s)


async def _fan_in(config: ClientConfig, topic: str, coroutines: int, duration_s: float,
                  payload: bytes) -> dict[str, Any]:
    histogram = new_histogram()
    async with AsyncClient(config=config) as client:
        writer = await client.writer(topic)
        started = time.monotonic()
        deadline = started + duration_s

        latencies_ns: list[int] = []
        keep = latencies_ns.append

        async def one() -> None:
            while time.monotonic() < deadline:
                sent = time.perf_counter_ns()
                await writer.write(payload)
                keep(time.perf_counter_ns() - sent)

        cpu_started = time.process_time()
        await asyncio.gather(*(one() for _ in range(coroutines)))
        elapsed = time.monotonic() - started
        cpu_s = time.process_time() - cpu_started
    for latency_ns in latencies_ns:
        record_us(histogram, latency_ns // 1000)
    return {**_rate(len(latencies_ns), elapsed, cpu_s), "coroutines": coroutines,
            "latency_ms": latency_ms(histogram)}


def _rate(events: int, elapsed_s: float, cpu_s: float) -> dict[str, Any]:
    return {"events": events, "duration_s": round(elapsed_s, 3),
            "events_per_s": round(events / elapsed_s, 1) if elapsed_s > 0 else 0.0,
            "cpu_us_per_event": round(cpu_s / events * 1e6, 2) if events else None}


def run_faces(config: ClientConfig, topic: str, *, duration_s: float, event_bytes: int,
              fan_in: int, rounds: int = 1, quiet: bool = False) -> dict[str, Any]:
    """Runs every scenario (see the module docstring); the report as a dict."""
    return asyncio.run(_scenarios(config, topic, duration_s, event_bytes, fan_in, rounds,
                                  quiet))


async def _scenarios(config: ClientConfig, topic: str, duration_s: float, event_bytes: int,
                     fan_in: int, rounds: int, quiet: bool) -> dict[str, Any]:
    # One loop for every async scenario (gRPC's poller may still hold events of a
    # closed loop when the next one starts); a blocking scenario runs on a thread
    # while the loop waits, idle.
    payload = b"x" * event_bytes

    def blocking(writers: int) -> Awaitable[dict[str, Any]]:
        return asyncio.to_thread(_blocking, config, topic, writers, duration_s, payload)

    def asynchronous(writers: int) -> Awaitable[dict[str, Any]]:
        return _async(config, topic, writers, duration_s, payload)

    faces: dict[str, Callable[[int], Awaitable[dict[str, Any]]]] = {
        "blocking": blocking, "async": asynchronous}
    results: dict[str, list[dict[str, Any]]] = {}
    for number in range(rounds):
        order = ("blocking", "async") if number % 2 == 0 else ("async", "blocking")
        for writers in (1, 4):
            for face in order:
                if not quiet:
                    print(f"{PROG}: {face} face, {writers} writer(s)"
                          f"{f', round {number + 1} of {rounds}' if rounds > 1 else ''}...",
                          file=sys.stderr)
                results.setdefault(f"{face}_{writers}", []).append(await faces[face](writers))
    report: dict[str, Any] = {"topic": topic, "event_bytes": event_bytes,
                              "duration_s_each": duration_s, "rounds": rounds}
    for scenario, each in results.items():
        median = sorted(each, key=lambda result: result["events_per_s"])[(len(each) - 1) // 2]
        report[scenario] = {**median, "rounds_events_per_s": [r["events_per_s"] for r in each]}
    report["async_vs_blocking"] = {
        str(writers): _ratio(report[f"async_{writers}"], report[f"blocking_{writers}"])
        for writers in (1, 4)}
    if not quiet:
        print(f"{PROG}: async fan-in of {fan_in} coroutines...", file=sys.stderr)
    report["fan_in"] = await _fan_in(config, topic, fan_in, duration_s, payload)
    return report


def _ratio(asynchronous: dict[str, Any], blocking: dict[str, Any]) -> float:
    """The async face's events/s over the blocking face's (0.0 if the latter is 0)."""
    if not blocking["events_per_s"]:
        return 0.0
    return round(float(asynchronous["events_per_s"]) / float(blocking["events_per_s"]), 2)


def _print(report: dict[str, Any]) -> None:
    rounds = report["rounds"]
    print(f"{report['event_bytes']}-byte events, {report['duration_s_each']:g} s each"
          f"{f', median of {rounds} rounds' if rounds > 1 else ''}:")
    for writers in (1, 4):
        blocking, asynchronous = report[f"blocking_{writers}"], report[f"async_{writers}"]
        print(f"  {writers} writer{'s' if writers > 1 else ' '}: blocking "
              f"{blocking['events_per_s']:>12,.1f} events/s   async "
              f"{asynchronous['events_per_s']:>12,.1f} events/s   async/blocking "
              f"{report['async_vs_blocking'][str(writers)]:.2f}   CPU us/event: blocking "
              f"{blocking['cpu_us_per_event']} async {asynchronous['cpu_us_per_event']}")
    fan = report["fan_in"]
    latency = fan["latency_ms"]
    print(f"  fan-in of {fan['coroutines']:,} coroutines (await writer.write): "
          f"{fan['events_per_s']:,.1f} events/s, latency p50 {latency['p50']} ms, "
          f"p99 {latency['p99']} ms, max {latency['max']} ms")


def _perf_faces(args: argparse.Namespace) -> int:
    try:
        endpoint = resolve_endpoint(args)
        config = dataclasses.replace(client_config(args), endpoint=endpoint)
    except FolioError as error:
        return fail(PROG, str(error))
    try:
        with folio.Client(config=config) as client, contextlib.suppress(TopicExistsError):
            client.create_topic(args.topic, args.segments)
        report = run_faces(config, args.topic, duration_s=args.duration_s,
                           event_bytes=args.event_bytes, fan_in=args.fan_in,
                           rounds=args.rounds, quiet=args.json)
    except FolioError as error:
        return fail(PROG, describe_error(error, endpoint))
    if args.json:
        print(json.dumps(report))
    else:
        _print(report)
    return 0


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Adds ``folio perf faces``."""
    faces = commands.add_parser(
        "faces", help="the asyncio face (folio.aio) against the blocking face, in one run",
        description="Write --event-bytes keyless events to TOPIC as fast as possible for "
        "--duration-s seconds per scenario and report acknowledged events/s (the time "
        "includes the final flush): the blocking face (folio.Client, a thread per writer "
        "calling write_event) and the asyncio face (folio.aio.AsyncClient, a coroutine per "
        "writer calling `await writer.send`) with 1 and 4 writers each, alternating; then "
        "--fan-in coroutines each calling `await writer.write` (acknowledged) in a loop on "
        "one async writer, with the latency of each write (p50, p99, max in ms). Each "
        "scenario also reports the process's CPU time per event. Both faces use the same "
        "writer settings (the defaults) and event size.",
    )
    faces.add_argument("--topic", required=True, metavar="TOPIC",
                       help="the topic (created if missing)")
    faces.add_argument("--segments", type=positive_int, default=4, metavar="N",
                       help="segments of the topic if it has to be created (default 4)")
    faces.add_argument("--event-bytes", type=non_negative_int, default=100, metavar="BYTES",
                       help="payload size of each event (default 100)")
    faces.add_argument("--duration-s", type=positive_float, default=5.0, metavar="S",
                       help="how long each scenario writes, > 0 (default 5)")
    faces.add_argument("--rounds", type=positive_int, default=1, metavar="N",
                       help="run the 1- and 4-writer scenarios N times, the first face "
                       "alternating, and report the median round of each (default 1)")
    faces.add_argument("--fan-in", type=positive_int, default=1000, metavar="C",
                       help="coroutines of the fan-in scenario (default 1000)")
    faces.add_argument("--json", action="store_true",
                       help="print exactly one JSON object on stdout and no progress lines")
    add_endpoint_option(faces)
    faces.set_defaults(func=_perf_faces)
