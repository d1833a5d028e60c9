"""``folio perf produce|consume``: OpenMessaging-Benchmark-style load against a broker.

``produce`` runs ``--writers`` writers, each in its own spawned process with
its own client (one writer runs in this process); their counts add up and
their latency histograms are merged. The load loop and how latency is
measured are in :mod:`folio.cli._perf_produce`; reading is in
:mod:`folio.cli._perf_consume`. Progress goes to stderr once a second; the
report to stdout, as text or (``--json``) one JSON object.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing
import queue as queue_module
import signal
import sys
import time
from typing import Any, Literal

import folio
from folio.cli._common import (
    add_endpoint_option,
    client_config,
    connect,
    describe_error,
    fail,
    non_negative_float,
    non_negative_int,
    positive_float,
    positive_int,
    resolve_endpoint,
)
from folio.cli._perf_consume import ConsumeConfig, run_consume
from folio.cli._perf_faces import add_parser as add_faces_parser
from folio.cli._perf_produce import (
    DEFAULT_TXN_IN_FLIGHT,
    GROUP_SIZE,
    ProduceConfig,
    ProduceResult,
    run_produce,
    worker_main,
)
from folio.cli._perf_stats import (
    BYTES_PER_MB,
    format_latency,
    latency_ms,
    merge_encoded,
    print_progress,
)
from folio.cli._signals import install_sigterm_as_interrupt
from folio.errors import FolioError, TopicExistsError, TopicNotFoundError

__all__ = ["register"]

PRODUCE_PROG = "folio perf produce"
CONSUME_PROG = "folio perf consume"
#: Deadline for spawned writers to connect and report ready.
_READY_TIMEOUT_S = 60.0


def _ensure_topic(client: folio.Client, prog: str, topic: str, segments: int) -> None:
    """Create ``topic`` with ``segments`` segments unless it exists, saying so on stderr."""
    try:
        client.get_topic(topic)
        return
    except TopicNotFoundError:
        pass
    try:
        client.create_topic(topic, segments)
    except TopicExistsError:
        return  # created meanwhile by someone else: fine
    print(f"{prog}: note: topic {topic} did not exist; created it with {segments} "
          f"segment{'' if segments == 1 else 's'}", file=sys.stderr)


def _writer_configs(args: argparse.Namespace, endpoint: str) -> list[ProduceConfig]:
    return [
        ProduceConfig(
            endpoint=endpoint, topic=args.topic, event_bytes=args.event_bytes,
            rate=args.rate / args.writers, duration_s=args.duration_s,
            linger_ms=args.linger_ms, batch_size_bytes=args.batch_size_bytes,
            max_in_flight=args.max_in_flight, txn_events=args.txn_events,
            txn_in_flight=args.txn_in_flight,
            client=dataclasses.replace(client_config(args), endpoint=endpoint),
        )
        for _ in range(args.writers)
    ]


class _SigintFlag:
    """While installed, Ctrl-C and SIGTERM set ``raised`` instead of raising KeyboardInterrupt."""

    def __init__(self) -> None:
        self.raised = False
        self._previous: Any = None
        self._previous_term: Any = None

    def __enter__(self) -> _SigintFlag:
        self._previous = signal.signal(signal.SIGINT, self._handle)
        self._previous_term = signal.signal(signal.SIGTERM, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        signal.signal(signal.SIGINT, self._previous)
        signal.signal(signal.SIGTERM, self._previous_term)

    def _handle(self, signum: int, frame: object) -> None:
        self.raised = True


def _produce_here(client: folio.Client, config: ProduceConfig, quiet: bool) -> ProduceResult:
    """One writer in this process."""
    start = time.monotonic()
    with _SigintFlag() as sigint:
        def tick(sent: int) -> bool:
            if not quiet:
                print_progress(PRODUCE_PROG, time.monotonic() - start, sent, "sent")
            return sigint.raised

        return run_produce(client, config, tick)


def _produce_spawned(configs: list[ProduceConfig], quiet: bool) -> list[ProduceResult]:
    """One spawned process per writer; raises RuntimeError if any could not run."""
    context = multiprocessing.get_context("spawn")
    queue: Any = context.Queue()
    go = context.Event()
    stop = context.Event()
    processes = [
        context.Process(target=worker_main, args=(config, index, queue, go, stop),
                        name=f"folio-perf-writer-{index}", daemon=True)
        for index, config in enumerate(configs)
    ]
    for process in processes:
        process.start()
    results: dict[int, ProduceResult] = {}
    failures: dict[int, str] = {}
    sent = [0] * len(processes)
    ready = 0
    start = next_progress = 0.0
    deadline = time.monotonic() + _READY_TIMEOUT_S

    def abort(index: int, why: str) -> None:
        failures[index] = why
        stop.set()
        go.set()  # release any writer still waiting; it stops at its first tick

    with _SigintFlag() as sigint:
        try:
            while any(index not in results and index not in failures
                      for index in range(len(processes))):
                try:
                    message = queue.get(timeout=0.2)
                except queue_module.Empty:
                    message = None
                if sigint.raised:
                    stop.set()  # the writers ignore Ctrl-C: they stop at their next tick
                now = time.monotonic()
                if message is None:
                    # Nothing queued for 0.2 s: a dead writer without a result crashed.
                    for index, process in enumerate(processes):
                        if (not process.is_alive() and index not in results
                                and index not in failures):
                            abort(index, f"writer {index} exited with code {process.exitcode} "
                                         "without a result")
                elif message[0] == "ready":
                    ready += 1
                    if ready == len(processes) and not go.is_set():
                        start, next_progress = now, now + 1.0
                        go.set()
                elif message[0] == "progress":
                    sent[message[1]] = message[2]
                elif message[0] == "result":
                    results[message[1]] = message[2]
                else:
                    abort(message[1], f"writer {message[1]}: {message[2]}")
                if not go.is_set() and now > deadline:
                    abort(-1, f"the writers did not all start within {_READY_TIMEOUT_S:.0f} s")
                if start and now >= next_progress:
                    next_progress += 1.0
                    if not quiet:
                        print_progress(PRODUCE_PROG, now - start, sum(sent), "sent")
        finally:
            for process in processes:
                process.join(timeout=30)
                if process.is_alive():
                    process.kill()
                    process.join()
    if failures:
        raise RuntimeError("; ".join(failures.values()))
    return [results[index] for index in sorted(results)]


def _produce_report(args: argparse.Namespace, results: list[ProduceResult],
                    group_size: int) -> dict[str, Any]:
    events = sum(result.events for result in results)
    duration_s = max(result.duration_s for result in results)
    payload_bytes = events * args.event_bytes
    histogram = merge_encoded([result.histogram for result in results])
    return {
        "events_per_s": round(events / duration_s, 1) if duration_s > 0 else 0.0,
        "mb_per_s": round(payload_bytes / BYTES_PER_MB / duration_s, 3) if duration_s > 0
        else 0.0,
        "latency_ms": latency_ms(histogram),
        "events": events,
        "bytes": payload_bytes,
        "duration_s": round(duration_s, 3),
        "event_bytes": args.event_bytes,
        "writers": args.writers,
        "errors": sum(result.errors for result in results),
        "topic": args.topic,
        "rate": args.rate,
        "latency_group_events": group_size,
        "txn_events": args.txn_events,
    }


def _print_produce_report(report: dict[str, Any]) -> None:
    rate = "max" if report["rate"] == 0 else f"{report['rate']:,.0f} events/s"
    mode = (f", transactions of {report['txn_events']} events" if report["txn_events"]
            else "")
    print(f"topic {report['topic']}: {report['writers']} writer"
          f"{'' if report['writers'] == 1 else 's'}, {report['event_bytes']}-byte events, "
          f"rate {rate}{mode}")
    print(f"events:     {report['events']:,} acknowledged, {report['errors']:,} errors "
          f"in {report['duration_s']:.2f} s")
    print(f"throughput: {report['events_per_s']:,.0f} events/s, "
          f"{report['mb_per_s']:,.2f} MB/s")
    print(f"publish latency (ms): {format_latency(report['latency_ms'])}")


def _perf_produce(args: argparse.Namespace) -> int:
    install_sigterm_as_interrupt()
    endpoint = resolve_endpoint(args)
    configs = _writer_configs(args, endpoint)
    try:
        with connect(args, endpoint) as client:
            _ensure_topic(client, PRODUCE_PROG, args.topic, args.segments)
            if args.writers == 1:
                results = [_produce_here(client, configs[0], args.json)]
        if args.writers > 1:
            results = _produce_spawned(configs, args.json)
    except FolioError as error:
        return fail(PRODUCE_PROG, describe_error(error, endpoint))
    except KeyboardInterrupt:  # before the load started (connecting, creating the topic)
        return fail(PRODUCE_PROG, "interrupted before any event was written")
    except RuntimeError as error:
        return fail(PRODUCE_PROG, str(error))
    report = _produce_report(args, results, configs[0].group_size)
    if args.json:
        print(json.dumps(report))
    else:
        _print_produce_report(report)
    first_error = next((result.error for result in results if result.error), None)
    if first_error is not None:
        return fail(PRODUCE_PROG, f"{report['errors']} events not acknowledged; first "
                                  f"failure: {first_error}")
    return 0


def _perf_consume(args: argparse.Namespace) -> int:
    install_sigterm_as_interrupt()
    endpoint = resolve_endpoint(args)
    start: Literal["earliest", "latest"] = args.start or "latest"
    config = ConsumeConfig(
        topic=args.topic, start=start, duration_s=args.duration_s,
        max_events=args.max_events,
        idle_timeout_s=None if args.timeout_ms == 0 else args.timeout_ms / 1000,
        read_next=args.read_next,
    )

    def tick(elapsed_s: float, events: int) -> bool:
        if not args.json:
            print_progress(CONSUME_PROG, elapsed_s, events, "read")
        return False

    try:
        with connect(args, endpoint) as client:
            _ensure_topic(client, CONSUME_PROG, args.topic, args.segments)
            result = run_consume(client, config, tick)
    except FolioError as error:
        return fail(CONSUME_PROG, describe_error(error, endpoint))
    except KeyboardInterrupt:  # before reading started (connecting, creating the topic)
        return fail(CONSUME_PROG, "interrupted before any event was read")
    duration_s = result.duration_s
    # From latest, an event is read just after it was written: now - send time is
    # end-to-end latency. From earliest the events may be hours old: the same
    # difference is only the data's age, and labelled so.
    latency_key, latency_label = (("end_to_end_latency_ms", "end-to-end latency")
                                  if start == "latest" else ("data_age_ms", "data age"))
    report = {
        "events_per_s": round(result.events / duration_s, 1) if duration_s > 0 else 0.0,
        "mb_per_s": round(result.payload_bytes / BYTES_PER_MB / duration_s, 3)
        if duration_s > 0 else 0.0,
        latency_key: latency_ms(result.histogram),
        "events": result.events,
        "bytes": result.payload_bytes,
        "duration_s": round(duration_s, 3),
        "topic": args.topic,
        "start": start,
        "stopped_by": result.stopped_by,
        "errors": 0,
    }
    if args.json:
        print(json.dumps(report))
    else:
        print(f"topic {args.topic} from {start}: {result.events:,} events, "
              f"{result.payload_bytes:,} bytes in {duration_s:.2f} s "
              f"(stopped by {result.stopped_by})")
        print(f"throughput: {report['events_per_s']:,.0f} events/s, "
              f"{report['mb_per_s']:,.2f} MB/s")
        print(f"{latency_label} (ms): {format_latency(report[latency_key])}")
    return 0


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--topic", required=True, metavar="TOPIC",
                        help="the topic (created if missing, with a note on stderr)")
    parser.add_argument("--segments", type=positive_int, default=1, metavar="N",
                        help="segments of the topic if it has to be created (default 1)")
    parser.add_argument("--json", action="store_true",
                        help="print exactly one JSON object on stdout and no progress lines")
    add_endpoint_option(parser)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``folio perf produce``, ``folio perf consume`` and ``folio perf faces``."""
    parser = subparsers.add_parser(
        "perf", help="measure throughput and latency with generated load",
        description="Generate load against a broker and report throughput and latency, "
        "in the manner of the OpenMessaging Benchmark. Run `perf consume` and `perf "
        "produce` side by side for end-to-end latency. A MB is 1,000,000 bytes.",
    )
    commands = parser.add_subparsers(dest="perf_command", metavar="COMMAND", required=True)

    produce = commands.add_parser(
        "produce", help="write events as fast as asked and measure publish latency",
        description="Write --event-bytes events to TOPIC for --duration-s seconds from "
        "--writers writers, then flush and report acknowledged events/s, MB/s and publish "
        "latency p50/p99/p99.9/max in ms (from an HdrHistogram at microsecond resolution). "
        "Only acknowledged events count. Latency is measured per group of "
        f"{GROUP_SIZE} consecutive events (fewer at low rates): from the send of the "
        "group's first event to the acknowledgement of its last, counted once per event "
        "of the group. So each event's latency is measured from its group's first send, "
        "pessimistic by at most the time to write the group (microseconds). The first 8 "
        "bytes of each event carry its send time (µs since the epoch, big-endian) for "
        "`perf consume`. Progress goes to stderr every second. Ctrl-C or SIGTERM stops "
        "early and reports what was done. Exits 1 if any event was not acknowledged.",
    )
    _add_common(produce)
    produce.add_argument("--event-bytes", type=non_negative_int, default=100, metavar="BYTES",
                         help="payload size of each event (default 100)")
    produce.add_argument("--rate", type=non_negative_float, default=0.0, metavar="EVENTS_S",
                         help="target events/s over all writers, paced per small batch; "
                         "0 for as fast as possible (default 0)")
    produce.add_argument("--duration-s", type=positive_float, default=10.0, metavar="S",
                         help="how long to write, > 0 (default 10)")
    produce.add_argument("--writers", type=positive_int, default=1, metavar="N",
                         help="writer processes, each with its own client; 1 runs in this "
                         "process (default 1)")
    produce.add_argument("--batch-size-bytes", type=positive_int, default=None, metavar="BYTES",
                         help="writer's batch size per segment (default: the SDK's, 256 KiB)")
    produce.add_argument("--linger-ms", type=non_negative_float, default=None, metavar="MS",
                         help="how long the writer waits to fill a batch (default: the "
                         "SDK's, 5)")
    produce.add_argument("--max-in-flight", type=positive_int, default=None, metavar="N",
                         help="unacknowledged batches per segment (default: the SDK's, 5)")
    produce.add_argument("--txn-events", type=non_negative_int, default=0, metavar="K",
                         help="write the events as single-routing-key transactions of K "
                         "events each (PDP-44), committed with commit_async; latency is "
                         "then per transaction, from its first event to its commit's "
                         "acknowledgement; 0 for plain writes (default 0)")
    produce.add_argument("--txn-in-flight", type=positive_int, default=DEFAULT_TXN_IN_FLIGHT,
                         metavar="N",
                         help="with --txn-events: commits outstanding per writer, over "
                         "8 transaction writers with a routing key each (transactions "
                         "rotate over them; commits queued behind one on the wire are sent "
                         "together, as one entry of whole transactions) (default "
                         "%(default)s)")
    produce.set_defaults(func=_perf_produce)

    consume = commands.add_parser(
        "consume", help="read events as fast as possible and measure throughput",
        description="Read TOPIC with one reader and report events/s and MB/s (from the "
        "first event read to the last) and, for events written by `perf produce`, "
        "end-to-end latency p50/p99/p99.9/max in ms (sampled on one event in 16; compares "
        "wall clocks, so run both on one machine). End-to-end latency needs --from latest "
        "(the default) with `perf produce` running; from earliest the same measure is the "
        "data's age (how long ago each event was written), reported as 'data age' "
        "(JSON key data_age_ms instead of end_to_end_latency_ms). Stops at --max-events, after "
        "--duration-s, after --timeout-ms without an event once one was read, or on "
        "Ctrl-C or SIGTERM. Progress goes to stderr every second.",
    )
    _add_common(consume)
    consume.add_argument("--duration-s", type=non_negative_float, default=None, metavar="S",
                         help="stop after this long (default: no limit)")
    consume.add_argument("--max-events", type=positive_int, default=None, metavar="N",
                         help="stop after N events (default: no limit)")
    consume.add_argument("--timeout-ms", type=non_negative_int, default=10_000, metavar="MS",
                         help="stop after MS without a new event, once one was read; 0 for "
                         "never (default 10000)")
    consume.add_argument("--read-next", action="store_true",
                         help="take one event per call (EventReader.read_next) instead of "
                         "up to 500 per call (read_many), to measure the per-event call")
    start = consume.add_mutually_exclusive_group()
    # No default on the flags (argparse would not see `--from latest` as given, so
    # it could be combined with --from-beginning); None means latest.
    start.add_argument("--from", dest="start", choices=("latest", "earliest"), default=None,
                       help="where to start: latest (only new events, for running beside "
                       "`perf produce`) or earliest (default latest)")
    start.add_argument("--from-beginning", dest="start", action="store_const",
                       const="earliest", help="same as --from earliest")
    consume.set_defaults(func=_perf_consume)

    add_faces_parser(commands)
