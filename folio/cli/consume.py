"""``folio consume TOPIC``: print events' payloads, one per line, like kafka-console-consumer."""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import sys
import time
from typing import BinaryIO, Literal

import folio
from folio.cli._common import (
    add_endpoint_option,
    describe_error,
    fail,
    non_negative_int,
    positive_int,
    resolve_endpoint,
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
                 max_events: int | None, timeout_ms: int | None) -> None:
    """Write payloads to ``out`` until ``max_events`` or ``timeout_ms`` of idleness."""
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
        out.write(event.payload)
        out.write(b"\n")
        count += 1
        if timeout_ms is not None:
            idle_deadline = time.monotonic() + timeout_ms / 1000


class _GroupEvents:
    """A group reader seen as ``_copy_events`` wants it: events only, timeout in seconds."""

    def __init__(self, reader: folio.GroupReader[bytes]) -> None:
        self._reader = reader

    def read_next(self, timeout: float | None = None) -> folio.Event[bytes] | None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(0, int((deadline - time.monotonic()) * 1000))
            read = self._reader.read_next(left)
            if read is None:
                return None
            if read.event is not None:
                return read.event
            # A checkpoint event: nothing to print; go on reading.


def _consume(args: argparse.Namespace) -> int:
    endpoint = resolve_endpoint(args)
    out = sys.stdout.buffer
    start: Literal["earliest", "latest"] = "earliest" if args.from_beginning else "latest"
    try:
        with folio.Client(endpoint) as client:
            if args.group is None:
                with client.reader(args.topic, start=start) as reader:
                    _copy_events(reader, out, args.max_events, args.timeout_ms)
            else:
                # SIGTERM leaves the group cleanly too, handing the segments back.
                install_sigterm_as_interrupt()
                group = client.reader_group(args.group, [args.topic], start=start)
                reader_id = args.reader_id or f"{socket.gethostname()}-{os.getpid()}"
                with group.reader(reader_id) as member:
                    _copy_events(_GroupEvents(member), out,  # type: ignore[arg-type]
                                 args.max_events, args.timeout_ms)
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
        "per-key order across scaling; on exit it hands its segments back to the group.",
    )
    parser.add_argument("topic", metavar="TOPIC", help="the topic to read")
    parser.add_argument("--from-beginning", action="store_true",
                        help="start at the earliest retained event of every segment "
                        "(default: start at the latest, printing only new events)")
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
    parser.set_defaults(func=_consume)
