"""A short client program for the clean-exit tests: write an event, read it back, exit.

``python -m tests.support.exit_script ENDPOINT TOPIC MODE`` creates ``TOPIC``,
writes one event, reads it back and exits. ``MODE`` says how the client ends:
``close`` calls ``close()``, ``with`` leaves a ``with`` block, ``open`` leaves
it open (the interpreter's exit must clean up), ``reader-open`` also leaves
its writer and reader open. ``tests/integration/test_clean_exit.py`` checks
that stderr stays empty and the exit code is 0.

A check registered with ``atexit`` before ``folio`` is imported runs after
the SDK's own exit handler: it writes to stderr when the client's IO loop is
still open at that point (its channels and calls left to the interpreter's
finalization, where gRPC's poller reports "Event loop is closed").
"""

from __future__ import annotations

import atexit
import sys
from typing import Any

_CLIENTS: list[Any] = []


@atexit.register
def _check_closed() -> None:
    for client in _CLIENTS:
        if not client._io.loop.is_closed():
            sys.stderr.write("the client's IO loop is still open at exit\n")


import folio  # noqa: E402  (after the check: atexit runs it last)


def _round_trip(client: folio.Client, topic: str) -> tuple[object, object]:
    client.create_topic(topic)
    writer = client.writer(topic)
    writer.write_event(b"one").result(30)
    reader = client.reader(topic, "earliest")
    event = reader.read_next(timeout=30)
    if event is None or event.payload != b"one":
        raise SystemExit(f"read back {event!r}")
    return writer, reader


def main(endpoint: str, topic: str, mode: str) -> None:
    """Runs one round trip and ends the client as ``mode`` says."""
    if mode == "with":
        with folio.Client(endpoint, timeout_s=30) as client:
            _CLIENTS.append(client)
            _round_trip(client, topic)
        return
    client = folio.Client(endpoint, timeout_s=30)
    _CLIENTS.append(client)
    writer, reader = _round_trip(client, topic)
    if mode == "close":
        client.close()
    elif mode == "open":
        writer.close()  # type: ignore[attr-defined]
        reader.close()  # type: ignore[attr-defined]
    # "reader-open": everything is left to the interpreter's exit.


if __name__ == "__main__":
    main(*sys.argv[1:4])
