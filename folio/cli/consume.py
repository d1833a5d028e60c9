"""``folio consume TOPIC``: print events' payloads, one per line, like kafka-console-consumer.

What is printed per event is in :mod:`folio.cli._consume_format`
(``--print``, ``--json``); where reading starts (``--from-offset``,
``--from-time``) in :mod:`folio.cli._consume_start`. SIGTERM stops it as
Ctrl-C does.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import sys
import time
from collections.abc import Callable, Mapping
from typing import BinaryIO, Literal

import folio
from folio.cli._common import (
    add_endpoint_option,
    connect,
    describe_error,
    fail,
    non_negative_int,
    positive_int,
    resolve_endpoint,
)
from folio.cli._consume_format import PRINT_FIELDS, formatter, print_fields
from folio.cli._consume_start import (
    StartPlan,
    offset_start,
    parse_time_ms,
    plan_from_offsets,
    plan_from_time,
)
from folio.cli._signals import install_sigterm_as_interrupt
from folio.errors import FolioError

__all__ = ["register"]

PROG = "folio consume"

#: Longest single wait for an event, so that Ctrl-C is noticed promptly.
_POLL_S = 0.5


def _silence_stdout() -> None:
    """Point stdout at /dev/null so that the exit-time flush of a closed pipe is quiet.

    (What the Python docs advise for SIGPIPE: the reader of our stdout went away.)
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def _copy_events(reader: folio.EventReader[bytes], out: BinaryIO,
                 max_events: int | None, timeout_ms: int | None,
                 line: Callable[[folio.Event[bytes]], bytes] | None = None) -> None:
    """Write events to ``out`` until ``max_events`` or ``timeout_ms`` of idleness.

    ``line`` makes the bytes written per event; None writes the payload and a newline.
    """
    count = 0
    idle_deadline = None if timeout_ms is None else time.monotonic() + timeout_ms / 1000
    while max_events is None or count < max_events:
        # Take what is already there without waiting; flush only before waiting,
        # so a fast stream is written in big chunks and a slow one line by line.
        event = reader.read_next(timeout=0)
        if event is None:
            out.flush()
            wait_s = _POLL_S
            if idle_deadline is not None:
                wait_s = min(wait_s, idle_deadline - time.monotonic())
                if wait_s <= 0:
                    return
            event = reader.read_next(timeout=wait_s)
            if event is None:
                continue
        if line is None:
            out.write(event.payload)
            out.write(b"\n")
        else:
            out.write(line(event))
        count += 1
        if timeout_ms is not None:
            idle_deadline = time.monotonic() + timeout_ms / 1000


class _GroupEvents:
    """A group reader seen as ``_copy_events`` wants it: events only, timeout in seconds.

    A group member acknowledges, at each ``read_next``, the events it returned
    before (its heartbeats report that position, and a member declared offline
    is resumed from it). So ``out`` is flushed before every ``read_next``: the
    acknowledged position never runs ahead of what reached stdout, and a member
    killed with SIGKILL loses no printed line (at-least-once, as the docs say).
    """

    def __init__(self, reader: folio.GroupReader[bytes], out: BinaryIO) -> None:
        self._reader = reader
        self._out = out

    def read_next(self, timeout: float | None = None) -> folio.Event[bytes] | None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            self._out.flush()
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            read = self._reader.read_next(timeout=left)
            if read is None:
                return None
            if read.event is not None:
                return read.event
            # A checkpoint event: nothing to print; go on reading.


class _Skipping:
    """A reader that leaves out, per segment, the events before a first offset to print."""

    def __init__(self, reader: folio.EventReader[bytes], skip_before: Mapping[str, int]) -> None:
        self._reader = reader
        self._skip_before = skip_before

    def read_next(self, timeout: float | None = None) -> folio.Event[bytes] | None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            event = self._reader.read_next(left)
            if event is None or event.offset >= self._skip_before.get(event.segment, 0):
                return event


def _plan(client: folio.Client, args: argparse.Namespace) -> StartPlan:
    if args.from_time is not None:
        return plan_from_time(client, args.topic, args.from_time)
    if args.from_offset:
        every = client.get_segments(args.topic, include_sealed=True)
        return plan_from_offsets(args.topic, every, args.from_offset, args.from_beginning)
    start: Literal["earliest", "latest"] = "earliest" if args.from_beginning else "latest"
    return StartPlan(start)


def _consume(args: argparse.Namespace) -> int:
    install_sigterm_as_interrupt()
    if args.group is not None and (args.from_offset or args.from_time is not None):
        args.usage_error("--from-offset and --from-time do not go with --group: a reader "
                         "group reads from its own positions")
    if args.from_offset and args.from_time is not None:
        args.usage_error("give --from-offset or --from-time, not both")
    endpoint = resolve_endpoint(args)
    out = sys.stdout.buffer
    line = formatter(args.print, args.json)
    start: Literal["earliest", "latest"] = "earliest" if args.from_beginning else "latest"
    try:
        with connect(args, endpoint) as client:
            if args.group is None:
                plan = _plan(client, args)
                with client.reader(args.topic, start=plan.start) as reader:
                    source = _Skipping(reader, plan.skip_before) if plan.skip_before \
                        else reader
                    _copy_events(source, out,  # type: ignore[arg-type]
                                 args.max_events, args.timeout_ms, line)
            else:
                # SIGTERM leaves the group cleanly too, handing the segments back.
                install_sigterm_as_interrupt()
                group = client.reader_group(args.group, [args.topic], start=start)
                reader_id = args.reader_id or f"{socket.gethostname()}-{os.getpid()}"
                with group.reader(reader_id) as member:
                    _copy_events(_GroupEvents(member, out), out,  # type: ignore[arg-type]
                                 args.max_events, args.timeout_ms, line)
        out.flush()
    except FolioError as error:
        with contextlib.suppress(BrokenPipeError):
            out.flush()
        return fail(PROG, describe_error(error, endpoint))
    except BrokenPipeError:
        _silence_stdout()
    except KeyboardInterrupt:
        try:
            out.flush()
        except BrokenPipeError:
            _silence_stdout()
    return 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``folio consume``."""
    parser = subparsers.add_parser(
        "consume", help="print a topic's events, one payload per line",
        description="Read TOPIC and write each event's payload to stdout as raw bytes "
        "followed by a newline (payloads are not decoded). Starts at the tail (only new "
        "events) unless --from-beginning. Runs until Ctrl-C unless --max-events or "
        "--timeout-ms stop it first; Ctrl-C and a closed stdout (e.g. `| head`) exit 0 "
        "quietly. Errors print 'folio consume: error: ...' and exit 1. With --group GROUP "
        "the consumer joins reader group GROUP (created if missing; --from-beginning then "
        "picks where the new group starts) and prints only its share of the segments, in "
        "per-key order across scaling; on exit it hands its segments back to the group. "
        "--print adds fields before each payload, tab-separated; --json prints one JSON "
        "object per event instead. SIGTERM stops it as Ctrl-C does.",
    )
    parser.add_argument("topic", metavar="TOPIC", help="the topic to read")
    starts = parser.add_mutually_exclusive_group()
    starts.add_argument("--from-beginning", action="store_true",
                        help="start at the earliest retained event of every segment "
                        "(default: start at the latest, printing only new events); with "
                        "--from-offset, the segments it does not name are also read from "
                        "the topic's first segments")
    starts.add_argument("--from-time", type=parse_time_ms, metavar="TIME", default=None,
                        help="start in every segment at the first event stamped at or after "
                        "TIME: ISO 8601 (2026-11-24T03:00:00Z; UTC when no zone is given) or "
                        "ms since the epoch. The broker keeps no time index: each segment is "
                        "binary-searched by reads (about log2(events) short reads), assuming "
                        "its writers' timestamps grow; when TIME lies before a scaling of the "
                        "topic, the older segments are read from their start and the events "
                        "before TIME skipped here")
    parser.add_argument("--from-offset", type=offset_start, action="append",
                        metavar="SEGMENT:OFFSET", default=None,
                        help="start segment SEGMENT (number, or name like orders/0) at OFFSET "
                        "(repeatable); active segments not named start at their first "
                        "event, as the SDK's Client.reader(start={segment: offset}); a named "
                        "segment's successors are read after it whole (an offset outside the "
                        "segment's retained range is an error)")
    shape = parser.add_mutually_exclusive_group()
    shape.add_argument("--print", type=print_fields, metavar="FIELD[,FIELD...]", default=None,
                       help=f"print these fields before each payload, each followed by a tab, "
                       f"in the order given; fields: {','.join(PRINT_FIELDS)} (key: null when "
                       "none; segment: its number; timestamp: ms since the epoch; headers: "
                       "name=value,... sorted by name, or NO_HEADERS)")
    shape.add_argument("--json", action="store_true",
                       help='print one JSON object per event: {"key", "segment", "offset", '
                       '"timestamp", "headers", "payload", "encoding"} where the payload is '
                       'the text when it is valid UTF-8 ("encoding": "utf-8"), else base64 '
                       '("encoding": "base64"); `folio produce --json` reads it back')
    parser.add_argument("--max-events", type=positive_int, metavar="N", default=None,
                        help="exit after N events (default: no limit)")
    parser.add_argument("--timeout-ms", type=non_negative_int, metavar="MS", default=None,
                        help="exit after MS milliseconds without a new event "
                        "(default: wait forever)")
    parser.add_argument("--group", metavar="GROUP", default=None,
                        help="read as a member of reader group GROUP, sharing the topic's "
                        "segments with its other members (default: read every segment)")
    parser.add_argument("--reader-id", metavar="ID", default=None,
                        help="this member's id in --group (default: HOST-PID)")
    add_endpoint_option(parser)
    parser.set_defaults(func=_consume, usage_error=parser.error)
