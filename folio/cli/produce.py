"""``folio produce TOPIC``: one event per line of stdin, through one ``EventWriter``."""

from __future__ import annotations

import argparse
import collections
import sys
from collections.abc import Iterable
from typing import BinaryIO

import folio
from folio.cli._common import add_endpoint_option, describe_error, fail, resolve_endpoint
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


def _produce(args: argparse.Namespace) -> int:
    endpoint = resolve_endpoint(args)
    acknowledged = 0
    written = 0
    # Futures not yet counted; the done ones at the left are counted as we go so
    # that the deque stays short however long stdin is.
    pending: collections.deque[folio.WriteFuture] = collections.deque()
    failure: BaseException | None = None
    try:
        with folio.Client(endpoint) as client:
            writer = client.writer(args.topic)
            try:
                write = writer.write_event
                key = args.key
                for line in lines_of(sys.stdin.buffer):
                    pending.append(write(line, routing_key=key))
                    written += 1
                    if written % 1024 == 0:
                        acknowledged += _count_acknowledged(pending)
                writer.flush()
            except FolioError as error:
                failure = error
            finally:
                # Every future is resolved once the writer is closed, so the count
                # below is exact even after a failure.
                try:
                    writer.close()
                except FolioError as error:
                    failure = failure or error
    except FolioError as error:
        failure = failure or error
    except KeyboardInterrupt:
        failure = KeyboardInterrupt("interrupted")
    acknowledged += sum(1 for future in pending
                        if future.done() and future.exception() is None)
    if failure is not None:
        return fail(PROG, f"{describe_error(failure, endpoint)} "
                          f"({acknowledged} of {written} events acknowledged)")
    print(f"{acknowledged} events acknowledged", file=sys.stderr)
    return 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``folio produce``."""
    parser = subparsers.add_parser(
        "produce", help="write one event per line of stdin to a topic",
        description="Write each line of stdin as one event to TOPIC: the line's bytes "
        "without its trailing newline (nothing is decoded or otherwise stripped; an empty "
        "line is an empty event). All events go through one writer, in order per routing "
        "key. At the end the writer is flushed and 'N events acknowledged' is printed to "
        "stderr. On any failure (no broker, unknown topic, an event too large, ...) it "
        "prints 'folio produce: error: ... (N of M events acknowledged)' and exits 1.",
    )
    parser.add_argument("topic", metavar="TOPIC", help="the topic to write to")
    parser.add_argument("--key", metavar="KEY", default=None,
                        help="routing key of every event: events of one key go to one "
                        "segment, in order (default: none, events are spread over segments)")
    add_endpoint_option(parser)
    parser.set_defaults(func=_produce)
