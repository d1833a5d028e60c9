"""``folio produce TOPIC``: one event per line of stdin, through one ``EventWriter``.

Lines are parsed by :mod:`folio.cli._produce_lines` (raw, ``--key-separator``
or ``--json``). Ctrl-C and SIGTERM stop reading stdin; what was written is
flushed and the usual summary printed, and the exit code is 0 when every
event written was acknowledged.
"""

from __future__ import annotations

import argparse
import collections
import sys
from collections.abc import Iterable
from typing import BinaryIO

import folio
from folio.cli._common import (
    add_endpoint_option,
    connect,
    describe_error,
    fail,
    resolve_endpoint,
)
from folio.cli._produce_lines import LineError, LineFormat, header_pair, parse_line
from folio.cli._signals import install_sigterm_as_interrupt
from folio.errors import FolioError

__all__ = ["lines_of", "register"]

PROG = "folio produce"


def lines_of(stream: BinaryIO) -> Iterable[bytes]:
    """Each line of ``stream`` as bytes without its trailing ``\\n`` (nothing else stripped).

    A last line without a newline is still a line; there is no empty line after
    a final newline.
    """
    for line in stream:
        yield line[:-1] if line.endswith(b"\n") else line


def _count_acknowledged(pending: collections.deque[folio.WriteFuture]) -> int:
    """Pop the done futures at the left of ``pending``; how many of them succeeded."""
    acknowledged = 0
    while pending and pending[0].done():
        if pending.popleft().exception() is None:
            acknowledged += 1
    return acknowledged


def _line_format(args: argparse.Namespace) -> LineFormat:
    separator = args.key_separator.encode() if args.key_separator is not None else None
    return LineFormat(key=args.key, key_separator=separator, json=args.json,
                      headers=dict(args.header or ()))


class _Stopped(Exception):
    """Reading stopped at a refused line (its message says which and why)."""


def _produce(args: argparse.Namespace) -> int:
    install_sigterm_as_interrupt()
    if args.key_separator == "":
        args.usage_error("--key-separator must not be empty")
    if args.json and args.key_separator is not None:
        args.usage_error("--json lines carry their own key: drop --key-separator")
    form = _line_format(args)
    endpoint = resolve_endpoint(args)
    acknowledged = 0
    written = 0
    # Futures not yet counted; the done ones at the left are counted as we go so
    # that the deque stays short however long stdin is.
    pending: collections.deque[folio.WriteFuture] = collections.deque()
    failure: BaseException | None = None
    interrupted = False
    try:
        with connect(args, endpoint) as client:
            # An event not acknowledged within the client's timeout_s fails
            # (DeliveryTimeoutError, its cause the last error retried).
            writer = client.writer(args.topic,
                                   delivery_timeout_ms=max(1, int(client.timeout_s * 1000)))
            try:
                write = writer.write_event
                for number, line in enumerate(lines_of(sys.stdin.buffer), start=1):
                    try:
                        payload, key, headers = parse_line(line, form)
                        pending.append(write(payload, routing_key=key, headers=headers or None))
                    except (LineError, FolioError) as error:
                        raise _Stopped(f"line {number}: {describe_error(error, endpoint)}"
                                       ) from None
                    written += 1
                    if written % 1024 == 0:
                        acknowledged += _count_acknowledged(pending)
                writer.flush()
            except (FolioError, _Stopped) as error:
                failure = error
            except KeyboardInterrupt:
                interrupted = True
            finally:
                # Every future is resolved once the writer is closed (it flushes
                # first), so the count below is exact even after a failure.
                try:
                    writer.close()
                except FolioError as error:
                    failure = failure or error
    except FolioError as error:
        failure = failure or error
    except KeyboardInterrupt:
        # A second Ctrl-C while flushing, or one before the writer was made: the
        # count below says whether everything read was acknowledged all the same.
        interrupted = True
    acknowledged += sum(1 for future in pending
                        if future.done() and future.exception() is None)
    if failure is None and interrupted and acknowledged < written:
        failure = KeyboardInterrupt("interrupted")
    if failure is not None:
        text = str(failure) if isinstance(failure, _Stopped | KeyboardInterrupt) \
            else describe_error(failure, endpoint)
        return fail(PROG, f"{text} ({acknowledged} of {written} events acknowledged)")
    print(f"{acknowledged} events acknowledged{' (interrupted)' if interrupted else ''}",
          file=sys.stderr)
    return 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``folio produce``."""
    parser = subparsers.add_parser(
        "produce", help="write one event per line of stdin to a topic",
        description="Write each line of stdin as one event to TOPIC: by default the line's "
        "bytes without its trailing newline (nothing is decoded or otherwise stripped; an "
        "empty line is an empty event); with --key-separator a KEY<SEP>PAYLOAD line; with "
        "--json a JSON object per line. All events go through one writer, in order per "
        "routing key. At the end (end of stdin, Ctrl-C or SIGTERM) the writer is flushed "
        "and 'N events acknowledged' is printed to stderr; exit 0 when every event read "
        "was acknowledged. A line that cannot be made into an event stops the run: "
        "'folio produce: error: line N: ... (A of W events acknowledged)' and exit 1, as "
        "on any other failure (no broker, unknown topic, an event too large, an event "
        "not acknowledged within the client's timeout_s, $FOLIO_CLIENT_TIMEOUT_S, "
        "default 30 s, while transient failures were retried, ...).",
    )
    parser.add_argument("topic", metavar="TOPIC", help="the topic to write to")
    keys = parser.add_mutually_exclusive_group()
    keys.add_argument("--key", metavar="KEY", default=None,
                      help="routing key of every event: events of one key go to one "
                      "segment, in order (default: none, events are spread over segments); "
                      "with --json, the key of lines without one")
    keys.add_argument("--key-separator", metavar="SEP", default=None,
                      help="each line is KEY SEP PAYLOAD, split at the first SEP (like "
                      "Kafka's parse.key=true key.separator=SEP); a line without SEP is "
                      "refused; an empty KEY means no key")
    parser.add_argument("--header", type=header_pair, action="append", metavar="NAME=VALUE",
                        help="a header on every event (repeatable); the value is sent as "
                        "its UTF-8 bytes")
    parser.add_argument("--json", action="store_true",
                        help='each line is a JSON object {"key": "k" or null, "headers": '
                        '{"name": "value"}, "payload": "text"} with "payload_base64" '
                        'instead of "payload" for binary payloads; key and headers are '
                        "optional; what `folio consume --json` prints is accepted")
    add_endpoint_option(parser)
    parser.set_defaults(func=_produce, usage_error=parser.error)
